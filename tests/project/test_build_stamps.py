"""setup.py reuses a build only while it is valid (the README's two ``pip install``
commands share ``build/``): Cython reruns when rtx's sources, Cython's or numpy's
version, or the directives change, or the C file is not the one it wrote; the
compiler reruns when the flags stamp differs.  Cython and the compiler are stubbed
here (a real build takes minutes); the decisions are setup.py's own code.
"""

from __future__ import annotations

import glob
import os
import runpy
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(
    not os.path.isfile(os.path.join(ROOT, "setup.py")) or not glob.glob(
        os.path.join(ROOT, "rtx", "*.pyx")), reason="no source tree with setup.py here")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of setup.py and rtx's Cython sources; cwd there; Cython and setup() stubbed."""
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    shutil.copy2(os.path.join(ROOT, "setup.py"), tmp_path)
    os.makedirs(tmp_path / "rtx")
    for pattern in ("*.pyx", "*.pxi", "*.pxd"):
        for f in glob.glob(os.path.join(ROOT, "rtx", pattern)):
            shutil.copy2(f, tmp_path / "rtx")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTX_CYTHON_DEBUG", raising=False)
    import Cython.Build
    import setuptools

    calls: list[bool] = []

    def fake_cythonize(exts, **kw):
        calls.append(kw.get("force"))
        for e in exts:
            for s in e.sources:
                with open(s[:-4] + ".c", "w") as fh:
                    fh.write(f"/* generated from {s}, call {len(calls)} */\n")
            e.sources = [s[:-4] + ".c" for s in e.sources]
        return exts

    monkeypatch.setattr(Cython.Build, "cythonize", fake_cythonize)
    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    monkeypatch.setattr(sys, "argv", ["setup.py", "build_ext"])
    return tmp_path, calls


def _run_setup() -> dict:
    return runpy.run_path("setup.py", run_name="__main__")


def test_cython_runs_only_when_its_inputs_changed(tree, monkeypatch):
    path, calls = tree
    _run_setup()
    assert calls == [True]  # nothing built yet
    _run_setup()
    assert calls == [True]  # the same sources: the C file is reused
    with open(path / "rtx" / "_segment.pxi", "a") as fh:
        fh.write("# an edit\n")
    _run_setup()
    assert len(calls) == 2
    _run_setup()
    assert len(calls) == 2
    monkeypatch.setenv("RTX_CYTHON_DEBUG", "1")  # other directives: other C
    _run_setup()
    assert len(calls) == 3
    monkeypatch.delenv("RTX_CYTHON_DEBUG")
    _run_setup()
    assert len(calls) == 4
    with open(path / "rtx" / "_kernels.c", "a") as fh:  # not the C file Cython wrote
        fh.write("/* touched */\n")
    _run_setup()
    assert len(calls) == 5
    os.remove(path / "rtx" / "_kernels.c")
    _run_setup()
    assert len(calls) == 6
    g = _run_setup()
    assert len(calls) == 6
    assert g["extensions"][0].sources == ["rtx/_kernels.c"]
    import Cython
    import numpy
    monkeypatch.setattr(Cython, "__version__", Cython.__version__ + ".post1")  # another Cython
    _run_setup()
    assert len(calls) == 7
    monkeypatch.setattr(numpy, "__version__", numpy.__version__ + ".post1")  # its .pxd
    _run_setup()
    assert len(calls) == 8
    _run_setup()
    assert len(calls) == 8


def test_compiler_runs_only_when_the_flags_changed(tree, monkeypatch):
    path, _ = tree
    g = _run_setup()
    from setuptools import Distribution
    from setuptools.command.build_ext import build_ext

    forced: list[bool] = []

    def fake_build(self):
        forced.append(bool(self.force))
        for ext in self.extensions:
            out = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as fh:
                fh.write(b"\x7fELF fake")

    monkeypatch.setattr(build_ext, "build_extensions", fake_build)

    def build(cflags: str | None = None) -> None:
        if cflags is None:
            monkeypatch.delenv("CFLAGS", raising=False)
        else:
            monkeypatch.setenv("CFLAGS", cflags)
        monkeypatch.setenv("RTX_OPENMP", "0")  # no probe compile
        exts = _run_setup()["extensions"]
        dist = Distribution({"name": "rtx-gnn", "ext_modules": exts,
                             "cmdclass": {"build_ext": g["BuildExt"]}})
        cmd = g["BuildExt"](dist)
        cmd.initialize_options()
        cmd.build_lib, cmd.build_temp = str(path / "build" / "lib"), str(path / "build" / "tmp")
        cmd.finalize_options()
        cmd.run()

    build()
    build()
    build("-O2")
    build("-O2")
    build()
    assert forced == [True, False, True, False, True]
    for f in glob.glob(str(path / "build" / "lib" / "rtx" / "_kernels*")):
        os.remove(f)  # the extension is gone: build it
    build()
    assert forced[-1] is True
    build()
    assert forced[-1] is False


@pytest.mark.skipif(sys.platform == "win32", reason="MSVC: no -g / -g0")
def test_release_builds_have_no_debug_info(tree, monkeypatch):
    g = _run_setup()
    flags = {}
    for cflags, debug in ((None, ""), ("-O2 -g", ""), (None, "1")):
        if cflags is None:
            monkeypatch.delenv("CFLAGS", raising=False)
        else:
            monkeypatch.setenv("CFLAGS", cflags)
        monkeypatch.setenv("RTX_CYTHON_DEBUG", debug)
        monkeypatch.setenv("RTX_OPENMP", "0")
        from setuptools import Distribution
        from setuptools.command.build_ext import build_ext
        monkeypatch.setattr(build_ext, "build_extensions", lambda self: None)
        exts = _run_setup()["extensions"]
        cmd = g["BuildExt"](Distribution({"name": "rtx-gnn", "ext_modules": exts}))
        cmd.initialize_options()
        cmd.build_temp = "build/tmp"
        cmd.finalize_options()
        cmd.run()
        flags[(cflags, debug)] = exts[0].extra_compile_args
    assert "-g0" in flags[(None, "")]
    assert "-g0" not in flags[("-O2 -g", "")]  # the sanitizer / valgrind jobs' -g stays
    assert "-g0" not in flags[(None, "1")]
