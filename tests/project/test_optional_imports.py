"""The suite runs with the [test] extra alone (CI's command 2): no test module, and no
shared test helper, imports an optional package (torch, PyG, mpi4py, ...) at module
level, where a missing package is a collection error that stops the whole run instead
of a skip.  Tests that compare against one import it inside the test (or through
pytest.importorskip)."""

from __future__ import annotations

import ast
import os

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)


def _required() -> set[str]:
    """Top-level modules the [test] extra and the library itself install."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    path = os.path.join(ROOT, "pyproject.toml")
    if not os.path.exists(path):
        pytest.skip("needs the source tree's pyproject.toml")
    with open(path, "rb") as fh:
        project = tomllib.load(fh)["project"]
    names = {"rtx", "numpy", "pytest", "_pytest", "conftest", "__future__"}
    aliases = {"Cython": "Cython", "threadpoolctl": "threadpoolctl"}
    for req in project["dependencies"] + project["optional-dependencies"]["test"]:
        dist = req.split(";")[0].split("[")[0].strip()
        for op in (">", "<", "=", "!", "~"):
            dist = dist.split(op)[0]
        names.add(aliases.get(dist, dist.replace("-", "_")))
    return names


def _module_level_imports(tree: ast.Module):
    """Imports that run when the module is imported: module level, including under
    if / with at module level, but not inside functions, classes' methods or a try
    that handles ImportError."""
    def walk(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield node.lineno, a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and node.module:
                    yield node.lineno, node.module.split(".")[0]
            elif isinstance(node, ast.Try):
                handled = any(
                    h.type is None or any(
                        isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError",
                                                             "Exception")
                        for n in ast.walk(h.type))
                    for h in node.handlers)
                if not handled:
                    yield from walk(node.body)
                yield from walk(node.orelse)
                yield from walk(node.finalbody)
            elif isinstance(node, (ast.If, ast.With)):
                yield from walk(node.body)
                yield from walk(getattr(node, "orelse", []))
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body)
    yield from walk(tree.body)


def _local_modules() -> set[str]:
    names = set()
    for dirpath, _, files in os.walk(TESTS):
        names.update(f[:-3] for f in files if f.endswith(".py"))
        names.add(os.path.basename(dirpath))
    return names


def test_no_test_module_imports_an_optional_package_at_module_level():
    import sys

    allowed = _required() | _local_modules() | set(sys.stdlib_module_names)
    offenders = []
    for dirpath, _, files in os.walk(TESTS):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read(), path)
            for line, mod in _module_level_imports(tree):
                if mod not in allowed:
                    offenders.append(f"{os.path.relpath(path, ROOT)}:{line}: import {mod}")
    assert not offenders, ("module-level imports of packages the [test] extra does not "
                           "install (a collection error without them):\n" + "\n".join(offenders))


def test_the_check_sees_a_module_level_optional_import():
    tree = ast.parse("import numpy\nimport torch\ntry:\n    import dgl\nexcept ImportError:\n"
                     "    dgl = None\nif True:\n    from torch_geometric import nn\n"
                     "def f():\n    import scipy_never\n")
    assert [m for _, m in _module_level_imports(tree)] == ["numpy", "torch", "torch_geometric"]
