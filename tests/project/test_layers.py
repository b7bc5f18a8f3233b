"""The layout holds: imports run one way (docs/architecture.md).

import-linter checks the contracts of pyproject.toml (CI's lint block runs it
too); the checks below also run where import-linter is not installed, and from
an installed rtx (they read the shipped .py files)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

import rtx

PKG = Path(rtx.__file__).resolve().parent
ROOT = PKG.parent
IN_TREE = (ROOT / "pyproject.toml").is_file() and (PKG / "_kernels.pyx").is_file()


def _imports(path: Path) -> list[tuple[str | None, int, str]]:
    """(enclosing function or None, line, absolute module) of each rtx import in ``path``."""
    mod = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    pkg = pkg.removesuffix(".__init__")
    out = []

    def visit(node: ast.AST, func: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] == "rtx":
                    out.append((func, child.lineno, target))
            elif isinstance(child, ast.Import):
                out.extend((func, child.lineno, a.name) for a in child.names
                           if a.name.split(".")[0] == "rtx")
            visit(child, f)

    visit(ast.parse(path.read_text()), None)
    return out


def test_no_late_bound_import():
    """Imports inside functions hide cycles: there are none (Tensor.backward calls
    the engine's backward, which sits below Tensor)."""
    late = [(str(p.relative_to(ROOT)), func, target)
            for p in sorted(PKG.rglob("*.py")) for func, _, target in _imports(p)
            if func is not None]
    assert late == [], late


def test_no_import_through_importlib():
    """``importlib.import_module`` of an rtx module by a literal name would hide an
    edge from import-linter (third-party modules, the rule families found by
    ``pkgutil`` and the backend registry's entry points may load that way)."""
    pat = re.compile(r"import_module\(\s*['\"f]*(\.|rtx)")
    hits = [str(p.relative_to(ROOT)) for p in sorted(PKG.rglob("*.py"))
            if pat.search(p.read_text())]
    assert hits == [], hits


def test_the_extension_is_loaded_by_rtx_loader_first():
    """rtx/_loader.py must load rtx._kernels before any other rtx module does (it
    sets libgomp's spin count for that load): no module imported before it by
    ``rtx/__init__.py`` may reach the extension.  (Sorting the imports once put
    ``_faces`` first and HetGAT epochs on 2 threads ran 2x slower.)"""
    code = ("import sys, builtins\n"
            "order = []\n"
            "real = builtins.__import__\n"
            "def hook(name, g=None, l=None, fromlist=(), level=0):\n"
            "    m = real(name, g, l, fromlist, level)\n"
            "    for k in ('rtx._loader', 'rtx._kernels'):\n"
            "        if k in sys.modules and k not in order:\n"
            "            order.append(k)\n"
            "    return m\n"
            "builtins.__import__ = hook\n"
            "import rtx\n"
            "print(order)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=str(ROOT.parent), env=child_env())
    assert r.returncode == 0, r.stderr
    # _loader imports _kernels inside its own module body: _loader is seen first
    assert r.stdout.strip() == "['rtx._loader', 'rtx._kernels']", r.stdout


def test_no_ignored_import_in_the_contract():
    """The layer contract holds without exceptions (no ``ignore_imports``)."""
    if not IN_TREE:
        pytest.skip("needs the source tree's pyproject.toml")
    assert "ignore_imports" not in (ROOT / "pyproject.toml").read_text()


def test_the_engine_never_imports_tensor_or_above():
    above = ("rtx.tensor", "rtx.autograd", "rtx.functional", "rtx.creation", "rtx.nn",
             "rtx._backend_state", "rtx.optim")
    for p in sorted((PKG / "_autodiff").rglob("*.py")):
        for _, line, target in _imports(p):
            assert not target.startswith(above), f"{p.relative_to(ROOT)}:{line} imports {target}"


def test_op_rule_families_import_only_their_base():
    for p in sorted((PKG / "_autodiff" / "ops").glob("*.py")):
        if p.name in ("__init__.py", "base.py"):
            continue
        for _, line, target in _imports(p):
            assert target == "rtx._autodiff.ops.base", f"{p.name}:{line} imports {target}"


def test_dtypes_imports_no_rtx_module():
    """rtx._dtypes is the bottom layer: dtypes, promotion and host conversion for all."""
    assert _imports(PKG / "_dtypes.py") == []


def test_backends_import_nothing_above_them():
    for p in sorted((PKG / "backend").rglob("*.py")):
        for _, line, target in _imports(p):
            assert target.startswith(("rtx.backend", "rtx._kernels", "rtx._threads",
                                      "rtx._dtypes")), \
                f"{p.relative_to(ROOT)}:{line} imports {target}"


@pytest.mark.skipif(not IN_TREE, reason="the Cython sources are not installed")
def test_kernel_sources_import_no_rtx_python_module():
    """The kernel layer (rtx/_kernels.pyx and its includes) sits below everything."""
    pat = re.compile(r"^\s*(from\s+(rtx|\.)[\w.]*\s+c?import|import\s+rtx)", re.M)
    for p in sorted(PKG.glob("*.pxi")) + [PKG / "_kernels.pyx"]:
        hits = [m.group(0).strip() for m in pat.finditer(p.read_text())]
        assert not hits, f"{p.name}: {hits}"


# The kernel base every family may use (rtx/_kernels.pyx includes it first);
# a family include uses only these, never another family's helpers.
KERNEL_BASE = ("_openmp.pxi", "_common.pxi", "_vmath.pxi", "_diag.pxi", "_storage.pxi",
               "_snapshot.pxi", "_csr.pxi")
_CDEF_NAME = re.compile(
    r"^(?:cdef|cpdef)\s+(?!class\b|enum\b|extern\b|struct\b)(?:[\w*\[\]]+\s+)*?"
    r"\**(\w+)\s*[(=\[]", re.M)
_CDEF_TYPE = re.compile(r"^(?:ctypedef\s+(?:struct|fused)|cdef\s+(?:class|struct))\s+(\w+)"
                        r"|^ctypedef\s+[\w\s*]+\(\*\s*(\w+)\)", re.M)
_ENUM_MEMBER = re.compile(r"^cdef enum:\n((?:[ \t]+\w+ = [^\n]*\n|[ \t]*#[^\n]*\n)+)", re.M)


def _kernel_private_names(text: str) -> set[str]:
    """The C-level names a .pxi defines at module level (functions, globals,
    types, enum members); Python-visible ``def`` functions are not private."""
    names = set(_CDEF_NAME.findall(text))
    names |= {a or b for a, b in _CDEF_TYPE.findall(text)}
    for block in _ENUM_MEMBER.findall(text):
        names |= set(re.findall(r"^[ \t]+(\w+) =", block, re.M))
    return names


@pytest.mark.skipif(not IN_TREE, reason="the Cython sources are not installed")
def test_kernel_families_use_only_the_shared_base():
    """No kernel family include uses another family's private helpers (so the
    include order of the families in _kernels.pyx is not load-bearing)."""
    families = [p for p in sorted(PKG.glob("*.pxi")) if p.name not in KERNEL_BASE]
    own = {p.name: _kernel_private_names(p.read_text()) for p in families}
    assert own["_segment.pxi"] >= {"_segment_parallel", "SEG_MAX", "SegmentJob"}  # the parser
    assert {"_csr_parallel", "csr_rows_fn", "CSR_DYNAMIC"} <= _kernel_private_names(
        (PKG / "_csr.pxi").read_text())
    for p in families:
        code = re.sub(r"#[^\n]*", "", p.read_text())
        for other, names in own.items():
            if other == p.name:
                continue
            used = {n for n in names if re.search(rf"\b{n}\b", code)}
            assert not used, f"{p.name} uses {sorted(used)} from {other}"
    included = re.findall(r'^include "(\w+\.pxi)"', (PKG / "_kernels.pyx").read_text(), re.M)
    assert included[: len(KERNEL_BASE)] == list(KERNEL_BASE)
    assert sorted(included) == sorted(p.name for p in PKG.glob("*.pxi"))


@pytest.mark.skipif(not IN_TREE, reason="needs the source tree's pyproject.toml")
@pytest.mark.skipif(shutil.which("lint-imports") is None and
                    not Path(sys.executable).with_name("lint-imports").exists(),
                    reason="import-linter is not installed")
def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    p = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout
