"""What an installed rtx ships: stubs in sync with the extension, py.typed, metadata,
and (for wheels) no build leftovers.

The stub check runs everywhere (in the tree too).  The distribution checks run
only against an *installed* rtx (``wheels/build.sh`` and cibuildwheel run the
suite from outside the checkout); ``RTX_EXPECT_REPAIRED_WHEEL=1`` (set by
``wheels/build.sh``) also requires the auditwheel-vendored OpenMP runtime.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

import rtx
from rtx import _kernels

PKG = Path(rtx.__file__).resolve().parent
SITE_DIRS = {Path(p).resolve() for p in (sysconfig.get_paths()["purelib"],
                                         sysconfig.get_paths()["platlib"])}
INSTALLED = PKG.parent in SITE_DIRS
needs_installed = pytest.mark.skipif(not INSTALLED, reason="rtx is imported from a source tree")

DIST = "rtx-gnn"   # the distribution name (the import name is rtx)

# The source tree the package list is derived from: this checkout, or
# RTX_SOURCE_TREE (wheels/build.sh runs the tests from a copy outside it).
SOURCE = Path(os.environ.get("RTX_SOURCE_TREE") or Path(__file__).resolve().parents[2])
HAS_SOURCE = (SOURCE / "rtx" / "__init__.py").is_file() and (SOURCE / "pyproject.toml").is_file()
needs_source = pytest.mark.skipif(not HAS_SOURCE, reason="no rtx source tree to derive from")


def source_packages() -> list[str]:
    """Every package of the source tree: each directory under rtx/ with an __init__.py."""
    return sorted(".".join(p.parent.relative_to(SOURCE).parts)
                  for p in (SOURCE / "rtx").rglob("__init__.py"))


# Cython's module-level helpers: not API.
STUBTEST_ALLOWLIST = ["rtx._kernels.__reduce_cython__", "rtx._kernels.__setstate_cython__",
                      "rtx._kernels.__test__"]


@pytest.mark.skipif(os.environ.get("RTX_TEST_INSTALLED") != "1",
                    reason="RTX_TEST_INSTALLED=1 asks for an installed rtx (wheel test runs)")
def test_runs_against_the_installed_package():
    assert INSTALLED, f"rtx was imported from {PKG}, not from an installation"
    assert not (Path.cwd() / "rtx" / "__init__.py").exists()


@needs_source
def test_every_source_directory_is_a_package():
    """pyproject finds packages (``packages.find``, no namespace packages): a
    directory of Python sources without an __init__.py would silently miss the wheel."""
    for d in (SOURCE / "rtx").rglob("*"):
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")):
            assert (d / "__init__.py").is_file(), f"{d} holds Python files but no __init__.py"
    pkgs = source_packages()
    assert "rtx" in pkgs and "rtx.backend" in pkgs and "rtx.examples" in pkgs, pkgs


def test_typing_files_ship_with_the_package():
    assert (PKG / "py.typed").is_file()
    assert (PKG / "_kernels.pyi").is_file()


def test_stubs_match_the_compiled_module(tmp_path):
    """``rtx/_kernels.pyi`` names exactly what the extension exports, with the same
    signatures (mypy's stubtest against the imported module)."""
    pytest.importorskip("mypy.stubtest")
    cfg = tmp_path / "mypy.ini"
    cfg.write_text(
        f"[mypy]\npython_version = 3.10\ncache_dir = {tmp_path / 'cache'}\n"
        # Only the stub is under test here: type errors elsewhere are mypy's job.
        "[mypy-rtx.*]\nignore_errors = True\n[mypy-rtx._kernels]\nignore_errors = False\n"
    )
    allow = tmp_path / "allowlist.txt"
    allow.write_text("\n".join(STUBTEST_ALLOWLIST) + "\n")
    env = dict(os.environ)
    if not INSTALLED:   # mypy finds installed packages itself and refuses site-packages here
        env.update(PYTHONPATH=str(PKG.parent), MYPYPATH=str(PKG.parent))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(cfg),
         "--allowlist", str(allow), "rtx._kernels"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_installed
def test_installed_distribution_metadata():
    meta = metadata.metadata(DIST)
    assert meta["Name"] == DIST
    assert meta["Version"] == rtx.__version__
    assert meta.get("License-Expression") == "BSD-3-Clause"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in classifiers)
    # no placeholder addresses (rtx has no public home yet: no URL at all rather than a fake)
    urls = [*(meta.get_all("Project-URL") or []), meta.get("Home-page") or ""]
    assert not any(".invalid" in u or "example." in u for u in urls), urls
    assert any(r.startswith("numpy") for r in metadata.requires(DIST) or [])
    assert DIST in metadata.packages_distributions()["rtx"]   # import name -> distribution


@needs_installed
def test_installed_files_have_no_build_leftovers():
    files = [str(f) for f in metadata.files(DIST) or []]
    rtx_files = [f for f in files if f.startswith("rtx/")]
    assert any(f.startswith("rtx/_kernels.") and f.endswith((".so", ".pyd")) for f in rtx_files)
    assert "rtx/py.typed" in rtx_files and "rtx/_kernels.pyi" in rtx_files
    # the generated faces' stubs: what type checkers read for Tensor.relu, rtx.add, ...
    assert "rtx/_faces.pyi" in rtx_files and "rtx/nn/_faces.pyi" in rtx_files
    leftovers = [f for f in rtx_files if f.endswith((".c", ".o", ".obj", ".pyx", ".pxi", ".pxd"))]
    assert leftovers == [], leftovers
    assert not any(f.startswith(("build/", "tests/", "benchmarks/")) for f in files)



@needs_installed
@needs_source
def test_installed_packages_match_the_source_tree():
    """Every package of the source tree is in the installed distribution, and nothing
    else: the list is derived from the tree (pyproject's packages.find), not kept by hand."""
    files = {str(f) for f in metadata.files(DIST) or []}
    installed = sorted(f[: -len("/__init__.py")].replace("/", ".") for f in files
                       if f.startswith("rtx/") and f.endswith("/__init__.py"))
    assert installed == source_packages()


@needs_installed
@pytest.mark.skipif(os.environ.get("RTX_EXPECT_REPAIRED_WHEEL") != "1",
                    reason="only for auditwheel-repaired wheels (wheels/build.sh)")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel is Linux-only")
def test_repaired_wheel_uses_its_vendored_openmp():
    assert _kernels.openmp_enabled()

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    addr = ctypes.cast(ctypes.CDLL(_kernels.__file__).omp_get_max_threads, ctypes.c_void_p)
    info = DlInfo()
    assert ctypes.CDLL(None).dladdr(addr, ctypes.byref(info)) != 0
    lib = Path(os.path.realpath(info.dli_fname.decode()))
    assert lib.parent == PKG.parent / "rtx.libs", lib
    assert lib.name.startswith("libgomp")


def _elf_section_names(path: Path) -> set[str] | None:
    """The section names of an ELF file (None when it is not one: macOS, Windows)."""
    import struct

    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        return None
    bits64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if bits64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
        def sec(i):  # (name offset, file offset, size)
            o = shoff + i * shentsize
            return (struct.unpack_from(end + "I", data, o)[0],
                    *struct.unpack_from(end + "QQ", data, o + 0x18))
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
        def sec(i):
            o = shoff + i * shentsize
            return (struct.unpack_from(end + "I", data, o)[0],
                    *struct.unpack_from(end + "II", data, o + 0x10))
    _, str_off, str_size = sec(shstrndx)
    table = data[str_off:str_off + str_size]
    return {table[n:table.index(b"\0", n)].decode() for n, _, _ in map(sec, range(shnum))}


def _last_debug_flag() -> str:
    """The ``-g`` flag that decided the build's debug info (the last one given)."""
    flags = [f for f in rtx.config()["compiler_flags"].split() if f.startswith("-g")]
    return flags[-1] if flags else ""


def test_debug_info_matches_the_build_flags():
    """The extension has DWARF debug info exactly when its recorded flags asked for it
    (``-g0`` after Python's ``-g`` in a release build; the sanitizer jobs keep ``-g``)."""
    names = _elf_section_names(Path(_kernels.__file__))
    if names is None:
        pytest.skip("not an ELF extension")
    assert (".debug_info" in names) == (_last_debug_flag() not in ("", "-g0")), (
        _last_debug_flag(), sorted(n for n in names if n.startswith(".debug")))


@needs_installed
def test_installed_extension_has_no_debug_info():
    """``pip install .`` is a release build: no debug info (it was 3.4 MB of 4.8 MB)."""
    if sys.platform == "win32":
        pytest.skip("MSVC writes debug info to .pdb files, never into the module")
    assert _last_debug_flag() in ("", "-g0"), rtx.config()["compiler_flags"]
    names = _elf_section_names(Path(_kernels.__file__))
    assert names is None or ".debug_info" not in names, sorted(names or ())
