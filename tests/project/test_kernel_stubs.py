"""The generator of ``rtx/_kernels.pyi`` (``tools/kernel_stubs.py``, run by
``tools/gen_faces.py``): the stub follows the ``.pxi`` sources, and a source that
leaves a type unsaid is refused.  Each test edits a copy of the sources in a
temporary tree (``tests/autograd/test_faces.py`` checks the checked-in stub is fresh)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("RTX_SOURCE_TREE") or Path(__file__).resolve().parents[2])
SEG_DEF = "def set_segment_parallel_min(Py_ssize_t nbytes):"
pytestmark = pytest.mark.skipif(not (SOURCE / "tools" / "kernel_stubs.py").is_file(),
                                reason="no rtx source tree (tools/, the .pxi files)")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SOURCE / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gen():
    return _load("kernel_stubs")


@pytest.fixture
def tree(tmp_path):
    """A copy of the sources the kernel stub is generated from (and the stubs)."""
    (tmp_path / "rtx" / "nn").mkdir(parents=True)
    for p in [*(SOURCE / "rtx").glob("*.pxi"), SOURCE / "rtx" / "_kernels.pyx",
              SOURCE / "rtx" / "_kernels.pyi", SOURCE / "rtx" / "_faces.pyi"]:
        shutil.copy(p, tmp_path / "rtx" / p.name)
    shutil.copy(SOURCE / "rtx" / "nn" / "_faces.pyi", tmp_path / "rtx" / "nn" / "_faces.pyi")
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_the_copy_generates_the_checked_in_stub(gen, tree):
    assert gen.stub_text(str(tree)) == (SOURCE / "rtx" / "_kernels.pyi").read_text()


def test_a_changed_signature_changes_the_stub(gen, tree):
    before = gen.stub_text(str(tree))
    line = "def first_out_of_bounds(idx: _Index, n: int) -> int: ..."
    assert line in before
    _edit(tree / "rtx" / "_index.pxi",
          "def first_out_of_bounds(const index_t[::1] idx, Py_ssize_t n):",
          "def first_out_of_bounds(const real[:, ::1] idx, double bound, bint strict=True):")
    after = gen.stub_text(str(tree))
    assert line not in after
    assert ("def first_out_of_bounds(idx: _Real, bound: float, strict: bool = True) -> int: ..."
            in after)


def test_a_changed_return_comment_changes_the_stub(gen, tree):
    _edit(tree / "rtx" / "_csr.pxi", SEG_DEF + "\n    #: -> int",
          SEG_DEF + "\n    #: -> tuple[int, str]")
    assert ("def set_segment_parallel_min(nbytes: int) -> tuple[int, str]: ..."
            in gen.stub_text(str(tree)))


def test_a_new_kernel_gets_a_stub_in_its_file_section(gen, tree):
    with open(tree / "rtx" / "_segment.pxi", "a") as f:
        f.write("\n\ndef segment_new_csr(const real[:, ::1] src, const int64_t[::1] perm,\n"
                "                    real[:, ::1] out, int num_threads, scale=None):\n"
                "    #: scale: float | None\n"
                "    pass\n")
    text = gen.stub_text(str(tree))
    stub = ("def segment_new_csr(\n    src: _Real, perm: _I64, out: _Real, num_threads: int, "
            "scale: float | None = None\n) -> None: ...")
    assert stub in text
    section = text.split("_segment.pxi\n", 1)[1].split("\n# ---", 1)[0]
    assert stub in section


def test_a_class_member_changes_the_stub(gen, tree):
    _edit(tree / "rtx" / "_snapshot.pxi", "    def __cinit__(self, Py_ssize_t nbytes):",
          "    def __cinit__(self, Py_ssize_t nbytes, bint zero=False):")
    text = gen.stub_text(str(tree))
    assert "    def __new__(cls, nbytes: int, zero: bool = False) -> IndexSnapshot: ..." in text


def test_a_returned_value_without_a_type_is_refused(gen, tree):
    _edit(tree / "rtx" / "_csr.pxi", SEG_DEF + "\n    #: -> int\n", SEG_DEF + "\n")
    with pytest.raises(gen.StubError,
                       match=r"_csr.pxi:\d+: set_segment_parallel_min returns a value"):
        gen.stub_text(str(tree))


@pytest.mark.parametrize("edit, match", [
    # a public constant without its stub type
    (("_index.pxi", "#: Final[dict[str, int]]\nSCATTER_STRATEGIES", "SCATTER_STRATEGIES"),
     "SCATTER_STRATEGIES needs its stub type"),
    # a stated type for a parameter Cython already types
    (("_csr.pxi", "    #: -> int\n", "    #: -> int\n    #: nbytes: str\n"),
     "nbytes is typed by Cython"),
    # a stated type for no parameter
    (("_csr.pxi", "    #: -> int\n", "    #: -> int\n    #: nbyte: int\n"),
     "names no untyped parameter"),
    # a memoryview of a type with no stub type
    (("_csr.pxi", "def csr_build(const index_t[::1] idx,",
      "def csr_build(const Py_ssize_t[::1] idx,"),
     "no stub type for a memoryview"),
])
def test_unsaid_or_wrong_types_are_refused(gen, tree, edit, match):
    name, old, new = edit
    _edit(tree / "rtx" / name, old, new)
    with pytest.raises(gen.StubError, match=match):
        gen.stub_text(str(tree))


def _gen_faces(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """tools/gen_faces.py run as a script from ``tree`` (its copy of tools/ finds the
    tree as the root; the faces' part imports the rtx this test runs)."""
    (tree / "tools").mkdir(exist_ok=True)
    for name in ("gen_faces.py", "kernel_stubs.py"):
        shutil.copy(SOURCE / "tools" / name, tree / "tools" / name)
    import rtx

    env = dict(os.environ, PYTHONPATH=str(Path(rtx.__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, str(tree / "tools" / "gen_faces.py"), *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_check_fails_in_one_line_on_a_stale_kernel_stub_and_writing_fixes_it(tree):
    _edit(tree / "rtx" / "_csr.pxi", "def set_segment_parallel_min(Py_ssize_t nbytes):",
          "def set_segment_parallel_min(Py_ssize_t nbytes, int extra=1):")
    old = (tree / "rtx" / "_kernels.pyi").read_text()
    r = _gen_faces(tree, "--check")
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("gen_faces: error: stale: rtx/_kernels.pyi ")
    assert (tree / "rtx" / "_kernels.pyi").read_text() == old   # --check writes nothing
    r = _gen_faces(tree)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "wrote rtx/_kernels.pyi\n"
    assert "def set_segment_parallel_min(nbytes: int, extra: int = 1) -> int: ..." in \
        (tree / "rtx" / "_kernels.pyi").read_text()
    assert _gen_faces(tree, "--check").returncode == 0
    assert not list((tree / "rtx").glob(".gen_faces.*"))   # no temp file left behind


def test_an_unreadable_source_is_a_one_line_error(tree):
    _edit(tree / "rtx" / "_csr.pxi", SEG_DEF + "\n    #: -> int\n", SEG_DEF + "\n")
    r = _gen_faces(tree, "--check")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("gen_faces: error: rtx/_csr.pxi:")


def test_the_kernel_stub_needs_no_importable_rtx(gen, tree, tmp_path):
    """Generated from text alone: a subprocess that cannot import rtx writes it."""
    code = ("import sys; sys.modules['rtx'] = None\n"
            "import importlib.util as u\n"
            f"s = u.spec_from_file_location('k', {str(SOURCE / 'tools' / 'kernel_stubs.py')!r})\n"
            "m = u.module_from_spec(s); s.loader.exec_module(m)\n"
            f"print(m.stub_text({str(tree)!r}), end='')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (SOURCE / "rtx" / "_kernels.pyi").read_text()
