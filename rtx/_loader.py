"""Loads rtx's compiled extension before anything else in rtx imports it.

Three things happen here, once, at ``import rtx``:

* Which OpenMP spin setting the extension's libgomp reads when it loads is
  recorded (``rtx/_spin.py``: libgomp's default or the user's; rtx sets none, and
  ``rtx.show_config()`` says which one holds).
* An import from an unbuilt source tree fails with a message saying how to build.
* ``RTX_PURE_PYTHON=1`` takes effect before any compiled module of the per-op path
  loads (``rtx/_compiled.py``: the ``.py`` files run instead).
"""

from __future__ import annotations

import os

from . import _compiled, _spin

_compiled.install()
_spin.before_load()
try:
    from . import _kernels  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on how rtx was built
    _here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(os.path.dirname(_here), "setup.py")):
        raise ImportError(
            f"rtx is being imported from its source tree ({_here}), which holds no compiled "
            "extension (`python -m ...` and `python -c ...` put the current directory first "
            "on sys.path). For an installed rtx, use the console scripts (rtx-hetgat, "
            "rtx-karate, pytest) or run from another directory; or build in place: "
            "`pip install -e .` or `python setup.py build_ext --inplace`."
        ) from _exc
    raise
