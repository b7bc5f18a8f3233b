"""Build script for rtx's compiled extension (``rtx._kernels``).

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

* Cython runs only when ``rtx/_kernels.c`` was not generated from the current
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
            if self.compiler.compiler_type != "msvc":
                # setuptools drops Python's default -O3 when CFLAGS is set: keep an
                # explicit optimisation level unless the caller chose one.
                if not any(f.startswith("-O") for f in env_cflags):
                    ext.extra_compile_args.append("-O3")
                if not debug_info:
                    # Python's own CFLAGS carry -g: 3.4 MB of the 4.8 MB extension.
                    ext.extra_compile_args.append("-g0")
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


def _cython_inputs() -> dict[str, object]:
    """What ``rtx/_kernels.c`` is generated from."""
    import Cython

    sources = sorted(glob.glob("rtx/*.pyx") + glob.glob("rtx/*.pxi") + glob.glob("rtx/*.pxd"))
    return {
        "sources": {p: _sha256(p) for p in sources},
        "cython": Cython.__version__,
        "numpy": np.__version__,  # cimport numpy: its .pxd
        "directives": _directives(),
    }


def _ext_modules(extensions: list[Extension]) -> list[Extension]:
    """``extensions`` with their ``.pyx`` sources turned into C: by Cython when the
    stamp says the C file is stale, else the C file as it is (see the docstring)."""
    inputs = _cython_inputs()
    c_files = {e.name: [s[:-4] + ".c" for s in e.sources] for e in extensions}
    old = _read_json(CYTHON_STAMP)
    fresh = (isinstance(old, dict) and old.get("inputs") == inputs
             and all(os.path.exists(c) for cs in c_files.values() for c in cs)
             and old.get("outputs") == {c: _sha256(c) for cs in c_files.values() for c in cs})
    if fresh:
        print("rtx: rtx/_kernels.c is up to date with its sources (build/rtx-cython-stamp.json)")
        for e in extensions:
            e.sources = c_files[e.name]
        return extensions
    modules = cythonize(extensions, compiler_directives=_directives(), include_path=["rtx"],
                        force=True)
    outputs = {c: _sha256(c) for cs in c_files.values() for c in cs}
    _write_json(CYTHON_STAMP, {"inputs": inputs, "outputs": outputs})
    return modules


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


extensions = [
    Extension(
        "rtx._kernels",
        ["rtx/_kernels.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    ),
]

setup(
    ext_modules=_ext_modules(extensions),
    cmdclass={"build_ext": BuildExt},
)
