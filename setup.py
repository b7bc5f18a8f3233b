"""Build script for rtx's compiled extension (``rtx._kernels``) and the compiled
copies of the per-op path's pure-Python modules (``rtx/_compiled.py``'s ``MODULES``,
translated unchanged by Cython into ``build/cython/``; ``RTX_COMPILE_PY=0`` skips
them; ``rtx/_compiled.json`` records the SHA-256 of each ``.py`` compiled).

OpenMP is probed by compiling *and linking* a tiny ``#pragma omp parallel``
program with the very compiler (and ``CFLAGS``/``LDFLAGS``) the extension uses.
When the probe fails the extension is built serially (the sources carry an
``#ifdef _OPENMP`` shim) and a warning says so.  ``RTX_OPENMP=1`` turns a failed
probe into an error (CI uses it), ``RTX_OPENMP=0`` forces the serial build.

Release builds carry no debug info (``-g0`` after Python's default ``-g``: the
extension is 1.4 MB instead of 4.8 MB); ``-g`` in ``CFLAGS`` (the sanitizer and
valgrind jobs of tools/) or ``RTX_CYTHON_DEBUG=1`` keeps it.

Rebuilds reuse what is still valid (pip >= 21.3 builds in the source tree, so the
README's two ``pip install`` commands share ``build/``):

* Cython runs only when ``rtx/_kernels.c`` (or a compiled module's C file: each
  group has its own stamp) was not generated from the current
  sources: a stamp in ``build/`` records the SHA-256 of every ``rtx/*.pyx``,
  ``*.pxi``, ``*.pxd``, the Cython and numpy versions, the directives and the
  generated file's own hash.  (Cython's own check compares timestamps with every
  ``.pxd`` it cimports, including Cython's and numpy's: in pip's fresh build
  environment those are always newer, so it regenerated the C file, and the
  compiler then rebuilt the extension, on every install.)
* The compiler runs only when the C file is newer than the built extension or the
  compile and link flags, the compiler or the numpy version changed (a second stamp
  beside the objects); otherwise setuptools keeps the extension it built.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import runpy
import shlex
import sys
import sysconfig
import tempfile
import textwrap
import warnings

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

OMP_PROBE = textwrap.dedent(
    """
    #include <omp.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        return n > 0 ? 0 : 1;
    }
    """
)


def _openmp_flags(compiler) -> tuple[list[str], list[str]]:
    """Return (compile_args, link_args) for OpenMP, or ([], []) if unsupported."""
    if compiler.compiler_type == "msvc":
        return ["/openmp"], []
    if sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"]), (["-fopenmp"], ["-fopenmp"])]
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    extra_ld = shlex.split(os.environ.get("LDFLAGS", ""))
    extra_cc = shlex.split(os.environ.get("CFLAGS", ""))
    for cflags, lflags in candidates:
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "omp_probe.c")
            with open(src, "w") as fh:
                fh.write(OMP_PROBE)
            try:
                objs = compiler.compile([src], output_dir=tmp, extra_postargs=cflags + extra_cc)
                compiler.link_executable(
                    objs, "omp_probe", output_dir=tmp, extra_postargs=lflags + extra_ld
                )
            except Exception:  # noqa: BLE001 - any compiler/linker failure means "no OpenMP"
                continue
            return cflags, lflags
    return [], []


class BuildExt(build_ext):
    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:   # (the compiled .py modules build side by side)
            self.parallel = os.cpu_count() or 1

    def build_extensions(self) -> None:
        mode = os.environ.get("RTX_OPENMP", "auto").strip().lower()
        cflags: list[str] = []
        lflags: list[str] = []
        if mode not in ("0", "off", "false", "no"):
            cflags, lflags = _openmp_flags(self.compiler)
            if not cflags:
                msg = (
                    "rtx: the compiler cannot build and link an OpenMP program; "
                    "building the SERIAL fallback (every kernel runs on one thread)."
                )
                if mode in ("1", "on", "true", "yes", "required"):
                    raise RuntimeError(msg + " RTX_OPENMP=1 requires OpenMP.")
                warnings.warn(msg, stacklevel=1)
                print("WARNING: " + msg, file=sys.stderr)
        env_cflags = shlex.split(os.environ.get("CFLAGS", ""))
        debug_info = _cython_debug() or any(
            f.startswith("-g") and f != "-g0" for f in env_cflags)
        for ext in self.extensions:
            kernels = ext.name == "rtx._kernels"   # (the compiled .py modules: no OpenMP)
            if self.compiler.compiler_type != "msvc":
                # setuptools drops Python's default -O3 when CFLAGS is set: keep an
                # explicit optimisation level unless the caller chose one.
                if not any(f.startswith("-O") for f in env_cflags):
                    ext.extra_compile_args.append("-O3")
                if not debug_info:
                    # Python's own CFLAGS carry -g: 3.4 MB of the 4.8 MB extension.
                    ext.extra_compile_args.append("-g0")
                # No a * b + c fused into one FMA (GNU C's default contracts where
                # the target has FMA: the kernels' AVX-512 copies, RTX_AVX2_CLONES):
                # every copy of a kernel rounds each product, so the bits never
                # depend on the CPU (rtx/_vmath.pxi).
                ext.extra_compile_args.append("-ffp-contract=off")
            if not kernels:
                continue
            ext.extra_compile_args += cflags
            ext.extra_link_args += lflags
            # Recorded for rtx.show_config().
            all_flags = (
                sysconfig.get_config_var("CFLAGS") or "",
                " ".join(env_cflags),
                " ".join(ext.extra_compile_args),
            )
            ext.define_macros.append(
                ("RTX_BUILD_CFLAGS",
                 '"{}"'.format(" ".join(" ".join(all_flags).split()).replace('"', "'")))
            )
            ext.define_macros.append(("RTX_BUILD_OPENMP", "1" if cflags else "0"))
        stamps = {ext.name: self._flags_stamp(ext) for ext in self.extensions}
        for ext in self.extensions:
            old = _read_json(stamps[ext.name][0])
            if old != stamps[ext.name][1]:
                if old is not None:
                    print(f"rtx: the build flags of {ext.name} changed: recompiling")
                self.force = True
        super().build_extensions()
        for ext in self.extensions:  # recomputed: the extension exists now
            _write_json(*self._flags_stamp(ext))

    def _flags_stamp(self, ext: Extension) -> tuple[str, dict[str, object]]:
        """Where this extension's compile-input stamp lives (beside its objects) and
        what it holds: everything but the sources that decides the compiled bytes."""
        stamp = {
            "compiler": list(getattr(self.compiler, "compiler_so", None) or
                             [self.compiler.compiler_type]),
            "linker": list(getattr(self.compiler, "linker_so", None) or []),
            "extra_compile_args": ext.extra_compile_args,
            "extra_link_args": ext.extra_link_args,
            "define_macros": [list(m) for m in ext.define_macros],
            "numpy": np.__version__,
            "python": sys.version,
            "env": {k: os.environ.get(k, "") for k in ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS")},
            "output": self.get_ext_fullpath(ext.name),
        }
        path = os.path.join(self.build_temp, f"{ext.name}.flags.json")
        if not os.path.exists(self.get_ext_fullpath(ext.name)):
            return path, {**stamp, "missing": True}  # never matches: build it
        return path, stamp


def _cython_debug() -> bool:
    return os.environ.get("RTX_CYTHON_DEBUG", "0") == "1"


def _read_json(path: str) -> object:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write_json(path: str, obj: object) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


CYTHON_STAMP = os.path.join("build", "rtx-cython-stamp.json")
PY_BUILD_DIR = os.path.join("build", "cython")   # the compiled .py modules' C files


# rtx/_compiled.py (standard library only, so readable before rtx is built): the modules
# compiled too, where each one's source is, the manifest's name
_COMPILED = runpy.run_path(os.path.join("rtx", "_compiled.py"))


def _compiled_modules() -> tuple[str, ...]:
    """The pure-Python modules compiled too (``MODULES``; none when
    ``RTX_COMPILE_PY=0``)."""
    if os.environ.get("RTX_COMPILE_PY", "1").strip() == "0":
        return ()
    return tuple(_COMPILED["MODULES"])


def _module_source(name: str) -> str:
    return _COMPILED["source_path"](name, "")   # (relative: rtx/x/y.py)


def _c_file(source: str) -> str:
    """Where Cython writes the C file of ``source``: beside a ``.pyx``, under
    ``build/cython/`` for a ``.py`` (never beside the module it would shadow)."""
    if source.endswith(".py"):
        return os.path.join(PY_BUILD_DIR, source[:-3] + ".c")
    return source[:-4] + ".c"


def _cython_inputs(extensions: list[Extension]) -> dict[str, object]:
    """What each group's C files are generated from (``kernels``: ``rtx/_kernels.c``
    from the ``.pyx``/``.pxi``/``.pxd`` files; ``py``: the compiled modules' C files
    from their ``.py`` files)."""
    import Cython

    sources = sorted(glob.glob("rtx/*.pyx") + glob.glob("rtx/*.pxi") + glob.glob("rtx/*.pxd"))
    common = {"cython": Cython.__version__, "numpy": np.__version__}   # cimport numpy: .pxd
    py = sorted(s for e in extensions for s in e.sources if s.endswith(".py"))
    return {
        "kernels": {"sources": {p: _sha256(p) for p in sources}, **common,
                    "directives": _directives()},
        "py": {"sources": {p: _sha256(p) for p in py}, **common,
               "directives": _py_directives()},
    }


def _group(e: Extension) -> str:
    return "py" if e.sources[0].endswith(".py") else "kernels"


def _ext_modules(extensions: list[Extension]) -> list[Extension]:
    """``extensions`` with their sources turned into C: by Cython for each group
    whose stamp says its C files are stale, else the C files as they are (see the
    docstring)."""
    inputs = _cython_inputs(extensions)
    py_names = [e.name for e in extensions if _group(e) == "py"]
    c_files = {e.name: [_c_file(s) for s in e.sources] for e in extensions}
    old = _read_json(CYTHON_STAMP)
    old = old if isinstance(old, dict) else {}
    stamp: dict[str, object] = {}
    out: list[Extension] = []
    for group in ("kernels", "py"):
        exts = [e for e in extensions if _group(e) == group]
        if not exts:
            continue
        cs = [c for e in exts for c in c_files[e.name]]
        prev = old.get(group)
        fresh = (isinstance(prev, dict) and prev.get("inputs") == inputs[group]
                 and all(os.path.exists(c) for c in cs)
                 and prev.get("outputs") == {c: _sha256(c) for c in cs})
        if fresh:
            print(f"rtx: the C files of {len(exts)} module(s) ({group}) are up to date with "
                  f"their sources ({CYTHON_STAMP})")
            for e in exts:
                e.sources = c_files[e.name]
        elif group == "kernels":
            exts = cythonize(exts, compiler_directives=_directives(), include_path=["rtx"],
                             force=True)
        else:
            exts = cythonize(exts, compiler_directives=_py_directives(), build_dir=PY_BUILD_DIR,
                             force=True, nthreads=min(os.cpu_count() or 1, len(exts)))
        stamp[group] = {"inputs": inputs[group], "outputs": {c: _sha256(c) for c in cs}}
        out += exts
    _write_json(CYTHON_STAMP, stamp)
    _write_manifest(py_names)
    return out


def _write_manifest(names: list[str]) -> None:
    """``rtx/_compiled.json``: ``{module: SHA-256 of its .py}`` for each compiled module
    (read by ``rtx._compiled.stale()``); removed when none is compiled."""
    path = os.path.join("rtx", _COMPILED["MANIFEST"])
    built = {name: _sha256(_module_source(name)) for name in names}
    if built:
        _write_json(path, built)
    elif os.path.exists(path):
        os.remove(path)


def _directives() -> dict[str, object]:
    debug = _cython_debug()
    return {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": True,
        "embedsignature": True,
    }


def _py_directives() -> dict[str, object]:
    """The compiled .py modules: Python's semantics unchanged.  Annotations stay
    annotations (``x: int`` would otherwise refuse a numpy integer), functions
    bind as methods and keep their signatures (``binding``)."""
    return {
        "language_level": 3,
        "annotation_typing": False,
        "binding": True,
    }


extensions = [
    Extension(
        "rtx._kernels",
        ["rtx/_kernels.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
] + [Extension(name, [_module_source(name)]) for name in _compiled_modules()]

setup(
    ext_modules=_ext_modules(extensions),
    cmdclass={"build_ext": BuildExt},
)
