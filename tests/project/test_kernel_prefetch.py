"""The graph kernels keep their software prefetches in the built extension.

GCC deletes a call to a function it takes for pure when the result is unused, and
a void function of loads and ``__builtin_prefetch`` only is pure to it.  The GATv2
kernels once lost every prefetch that way (their Cython helper was too big for the
early inliner) and ran 3-9x slower at E = 10^6 with every value test passing.  This
reads the extension's machine code (``objdump -d``) and asserts that each kernel
chunk below, or a function it calls, still issues prefetch instructions.

x86-64 ELF builds that keep their local symbols (the in-place, CI, ASan and
valgrind builds); skipped where objdump or the symbols are missing.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
from functools import cache

import pytest

from rtx import _kernels

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64")
    or shutil.which("objdump") is None,
    reason="reads x86-64 ELF machine code with objdump")

# The chunk functions the parallel drivers call through a pointer (their address is
# taken, so they always exist as symbols), per kernel family, and the row loops
# behind the index ops, segment reductions and the sampler (called directly: a
# build that inlined one fails its case, to be pointed at the caller instead).
ROOTS = [
    "_gatv2_fwd_chunk",         # gatv2_scores_csr
    "_gatv2_bwd_dst_chunk",     # gatv2_bwd_dst
    "_gatv2_bwd_src_chunk",     # gatv2_bwd_src
    "_message_chunk",           # message_csr
    "_message_bwd_chunk",       # message_backward_csr
    "_segment_chunk",           # the CSR segment softmax
    "_gather_block",            # index_select's row gather
    "_scatter_row_range",       # index_add's scatter by owned target rows
    "_csr_reduce",              # the CSR segment sum / mean / max rows
    "_relabel_type",            # the neighbour sampler's relabelling pass
]

_HEAD = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
_CALL = re.compile(r"\bcall\s+[0-9a-f]+ <([^>+]+)>")


@cache
def _functions() -> dict[str, tuple[int, frozenset[str]]]:
    """name -> (prefetch instructions, names of the functions it calls directly)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", _kernels.__file__],
                         capture_output=True, text=True, check=True).stdout
    funcs: dict[str, tuple[int, frozenset[str]]] = {}
    name, count, calls = None, 0, set()
    for line in out.splitlines():
        m = _HEAD.match(line)
        if m:
            if name is not None:
                funcs[name] = (count, frozenset(calls))
            name, count, calls = m.group(1), 0, set()
        elif name is not None:
            if "prefetch" in line:
                count += 1
            c = _CALL.search(line)
            if c:
                calls.add(c.group(1))
    if name is not None:
        funcs[name] = (count, frozenset(calls))
    return funcs


def _reachable_prefetches(root: str, depth: int = 4) -> int:
    funcs = _functions()
    seen, frontier, total = set(), [root], 0
    for _ in range(depth):
        nxt = []
        for f in frontier:
            if f in seen or f not in funcs:
                continue
            seen.add(f)
            n, calls = funcs[f]
            total += n
            nxt.extend(calls)
        frontier = nxt
    return total


@pytest.mark.parametrize("fragment", ROOTS)
def test_kernel_chunk_issues_prefetches(fragment):
    names = [n for n in _functions() if n.endswith("_kernels_" + fragment)]
    if not names:
        if not any(n.endswith("_kernels__message_chunk") for n in _functions()):
            pytest.skip("the extension's local symbols are stripped")
        pytest.fail(f"no function {fragment} in the built extension (inlined into its "
                    "caller? list the caller in ROOTS instead)")
    for name in names:
        assert _reachable_prefetches(name) > 0, (
            f"{name}: no prefetch instruction in it or its callees (a prefetch helper "
            "deleted as pure? rtx/_gatv2.pxi's rtx_gatv2_prefetch)")
