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
    """A copy of setup.py, rtx's Cython sources and the compiled .py modules; cwd there;
    Cython and setup() stubbed."""
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    shutil.copy2(os.path.join(ROOT, "setup.py"), tmp_path)
    os.makedirs(tmp_path / "rtx")
    for pattern in ("*.pyx", "*.pxi", "*.pxd"):
        for f in glob.glob(os.path.join(ROOT, "rtx", pattern)):
            shutil.copy2(f, tmp_path / "rtx")
    shutil.copy2(os.path.join(ROOT, "rtx", "_compiled.py"), tmp_path / "rtx")
    modules = runpy.run_path(os.path.join(ROOT, "rtx", "_compiled.py"))["MODULES"]
    for name in modules:
        rel = os.path.join(*name.split(".")) + ".py"
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTX_COMPILE_PY", raising=False)
    monkeypatch.delenv("RTX_CYTHON_DEBUG", raising=False)
    import Cython.Build
    import setuptools

    calls: list[bool] = []   # the kernels' Cython runs (force=)
    py_calls: list[list[str]] = []   # the compiled modules' runs (their names)

    def fake_cythonize(exts, **kw):
        if exts[0].sources[0].endswith(".py"):
            py_calls.append([e.name for e in exts])
        else:
            calls.append(kw.get("force"))
        for e in exts:
            cs = []
            for s in e.sources:
                c = (os.path.join(kw["build_dir"], s[:-3] + ".c") if s.endswith(".py")
                     else s[:-4] + ".c")
                os.makedirs(os.path.dirname(c) or ".", exist_ok=True)
                with open(c, "w") as fh:
                    fh.write(f"/* generated from {s}, call {len(calls) + len(py_calls)} */\n")
                cs.append(c)
            e.sources = cs
        return exts

    monkeypatch.setattr(Cython.Build, "cythonize", fake_cythonize)
    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    monkeypatch.setattr(sys, "argv", ["setup.py", "build_ext"])
    return tmp_path, calls, py_calls


def _run_setup() -> dict:
    return runpy.run_path("setup.py", run_name="__main__")


def test_cython_runs_only_when_its_inputs_changed(tree, monkeypatch):
    path, calls, py_calls = tree
    _run_setup()
    assert calls == [True]  # nothing built yet
    assert len(py_calls) == 1
    _run_setup()
    assert calls == [True]  # the same sources: the C file is reused
    with open(path / "rtx" / "_segment.pxi", "a") as fh:
        fh.write("# an edit\n")
    _run_setup()
    assert len(calls) == 2
    _run_setup()
    assert len(calls) == 2
    assert len(py_calls) == 1  # the compiled modules' C files were reused throughout
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


def test_compiled_modules_have_their_own_stamp_and_manifest(tree, monkeypatch):
    path, calls, py_calls = tree
    g = _run_setup()
    names = runpy.run_path(str(path / "rtx" / "_compiled.py"))["MODULES"]
    assert py_calls == [list(names)]
    exts = {e.name: e.sources for e in g["extensions"]}
    assert set(exts) == {"rtx._kernels", *names}
    for name in names:   # C files under build/cython/, never beside the .py they'd shadow
        assert exts[name] == [os.path.join("build", "cython", *name.split(".")) + ".c"]
    manifest = g["_read_json"](os.path.join("rtx", "_compiled.json"))
    assert manifest == {n: g["_sha256"](os.path.join(*n.split(".")) + ".py") for n in names}
    src = path / (os.path.join(*names[0].split(".")) + ".py")
    with open(src, "a") as fh:
        fh.write("# an edit\n")
    g = _run_setup()
    assert len(py_calls) == 2 and calls == [True]   # only the py group reran
    assert g["_read_json"](os.path.join("rtx", "_compiled.json"))[names[0]] == g["_sha256"](
        str(src))
    _run_setup()
    assert len(py_calls) == 2
    monkeypatch.setenv("RTX_COMPILE_PY", "0")   # the kernels only; no manifest left behind
    g = _run_setup()
    assert [e.name for e in g["extensions"]] == ["rtx._kernels"]
    assert not os.path.exists(path / "rtx" / "_compiled.json")
    assert len(py_calls) == 2 and calls == [True]


def test_compiler_runs_only_when_the_flags_changed(tree, monkeypatch):
    path, _, _ = tree
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
