"""Build the deliberate-bug module (tools/selftest/rtx_selftest_bugs.pyx) at -O0.

    python tools/selftest/build.py OUTDIR [--asan]

Writes ``OUTDIR/rtx_selftest_bugs*.so`` (and its C file and objects under
``OUTDIR/tmp``).  ``--asan`` adds the same sanitizer flags as the ASan job;
without it the module is a plain ``-O0 -g`` build for valgrind.  The flags are
set here, not taken from the environment: at -O3 gcc removes some of the bugs.
"""

from __future__ import annotations

import os
import sys

SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
]


def main() -> None:
    args = sys.argv[1:]
    asan = "--asan" in args
    args = [a for a in args if a != "--asan"]
    if len(args) != 1 or args[0].startswith("-"):   # --help is not a directory
        sys.exit(__doc__)
    out = os.path.abspath(args[0])
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    cflags = ["-O0", "-g", "-fopenmp"] + (SANITIZE if asan else [])
    lflags = ["-fopenmp"] + (["-fsanitize=address,undefined"] if asan else [])
    # setuptools puts $CFLAGS after Python's own flags: -O0 here wins over -O3 there.
    os.environ["CFLAGS"] = " ".join(cflags)
    os.environ["LDFLAGS"] = " ".join(lflags)

    from Cython.Build import cythonize
    from setuptools import Extension, setup

    ext = Extension(
        "rtx_selftest_bugs",
        [os.path.join(here, "rtx_selftest_bugs.pyx")],
        extra_compile_args=cflags,
        extra_link_args=lflags,
    )
    setup(
        name="rtx_selftest_bugs",
        ext_modules=cythonize([ext], build_dir=tmp, language_level=3, quiet=True),
        script_args=["-q", "build_ext", "--force", "--build-lib", out, "--build-temp", tmp],
    )


if __name__ == "__main__":
    main()
