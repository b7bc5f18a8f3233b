"""Every ```python block of README.md and docs/*.md runs, so the docs cannot drift.

Each file's blocks run in order in ONE namespace (a later block may use what an
earlier one defined, as a reader would), in a child interpreter whose working
directory is an empty temporary folder (a block writing ``ckpt.npz`` writes it
there), against the rtx under test.

A block opts out only with a visible first line ``# docs-test: skip (<reason>)``,
for what truly cannot run here (e.g. it needs ``mpiexec``); the reason is required.
A block that imports an optional library that is not installed (PyTorch, JAX, ...)
is reported as skipped after every other block of its file has run.
"""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
from conftest import run_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC_FILES = [p for p in [os.path.join(ROOT, "README.md"),
                         *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
             if os.path.isfile(p)]

FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SKIP = re.compile(r"\A#\s*docs-test:\s*skip\b\s*(.*)")
OPTIONAL = ("torch", "jax", "jaxlib", "mpi4py", "torch_geometric", "pymetis", "matplotlib",
            "tqdm", "scipy", "numexpr")


def python_blocks(path: str) -> list[tuple[int, str]]:
    """``(first line number of the code, code)`` for each ```python block of ``path``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(text)]


# Runs in the child: argv[1] is a JSON file [path, [[line, code], ...], OPTIONAL].
# Prints one JSON line last.
RUNNER = r"""
import json, sys
with open(sys.argv[1]) as f:
    path, blocks, optional = json.load(f)
ns = {"__name__": "__docs__"}
report = {"ran": 0, "missing": []}
for line, code in blocks:
    try:
        exec(compile(code, f"{path}:{line}", "exec"), ns)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in optional:
            raise
        report["missing"].append([line, exc.name])
        continue
    report["ran"] += 1
print(json.dumps(report))
"""


def test_the_docs_have_python_blocks():
    if not DOC_FILES:
        pytest.skip("README.md and docs/ are not here (tests copied out of the checkout)")
    counts = {os.path.relpath(p, ROOT): len(python_blocks(p)) for p in DOC_FILES}
    assert counts.get("README.md", 0) >= 1, counts
    assert sum(counts.values()) >= 10, counts


def test_block_extraction(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n```python\na = 1\n```\n\n```bash\nls\n```\n```python\nb = a\n```\n")
    assert python_blocks(str(md)) == [(3, "a = 1\n"), (10, "b = a\n")]


@pytest.mark.parametrize("path", [p for p in DOC_FILES if python_blocks(p)],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_doc_snippets_run(path, tmp_path):
    blocks = python_blocks(path)
    skipped = [(line, SKIP.match(code)) for line, code in blocks if SKIP.match(code)]
    for line, m in skipped:
        assert m.group(1).strip(" ()"), (
            f"{path}:{line}: '# docs-test: skip' needs a reason in parentheses")
    assert len(skipped) <= 1, skipped  # opting out stays the exception
    todo = [(line, code) for line, code in blocks if not SKIP.match(code)]
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([path, todo, OPTIONAL]))
    p = run_python(["-c", RUNNER, str(spec)], timeout=300)
    assert p.returncode == 0, f"a ```python block of {path} failed:\n{p.stderr[-4000:]}"
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["ran"] + len(report["missing"]) == len(todo), report
    if report["missing"]:
        pytest.skip(f"ran {report['ran']} of {len(blocks)} blocks; not installed: "
                    + ", ".join(f"{name} (line {line})" for line, name in report["missing"]))
