"""Build script for rtx's compiled extension (``rtx._kernels``).

OpenMP is probed by compiling *and linking* a tiny ``#pragma omp parallel``
program with the very compiler (and ``CFLAGS``/``LDFLAGS``) the extension uses.
When the probe fails the extension is built serially (the sources carry an
``#ifdef _OPENMP`` shim) and a warning says so.  ``RTX_OPENMP=1`` turns a failed
probe into an error (CI uses it), ``RTX_OPENMP=0`` forces the serial build.
"""

from __future__ import annotations

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
        for ext in self.extensions:
            if self.compiler.compiler_type != "msvc":
                # setuptools drops Python's default -O3 when CFLAGS is set: keep an
                # explicit optimisation level unless the caller chose one.
                if not any(f.startswith("-O") for f in env_cflags):
                    ext.extra_compile_args.append("-O3")
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
        super().build_extensions()


def _directives() -> dict[str, object]:
    debug = os.environ.get("RTX_CYTHON_DEBUG", "0") == "1"
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
    ext_modules=cythonize(
        extensions,
        compiler_directives=_directives(),
        include_path=["rtx"],
    ),
    cmdclass={"build_ext": BuildExt},
)
