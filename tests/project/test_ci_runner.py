"""CI's block runner (.ci/blocks.sh, used by .ci/run) on fake blocks: every block
runs even when an earlier one failed, a block stops at its own first failing
command, the summary lists each block's name, result and seconds, and the exit
status is non-zero when any block failed.  The real .ci/run takes ~25 min and
installs packages: only its structure is checked here."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCKS = ROOT / ".ci" / "blocks.sh"
RUN = ROOT / ".ci" / "run"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or not BLOCKS.exists(),
                                reason="needs bash and the source tree's .ci/")


def _bash(script: str, errexit: bool) -> subprocess.CompletedProcess[str]:
    prelude = f". {BLOCKS}\n" + ("set -e\n" if errexit else "")
    return subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def _summary(out: str) -> dict[str, tuple[str, int]]:
    rows = out.split("=== summary\n", 1)[1].splitlines()[1:]
    got = {}
    for line in rows:
        m = re.fullmatch(r"(.+?)\s+(PASS|FAIL)\s+(\d+)", line)
        if m:
            got[m.group(1)] = (m.group(2), int(m.group(3)))
    return got


FAKE = """
first() { echo first-ran; }
second() { echo second-start; false; echo second-NOT-REACHED; }
third() { echo third-ran; sleep 1; }
fourth() { echo fourth-ran; return 3; }
run_block "one block" first
run_block "two" second
run_block "three" third
run_block "four" fourth
ci_summary
echo "summary-rc=$?"
"""


@pytest.mark.parametrize("errexit", [False, True], ids=["plain", "under-set-e"])
def test_every_block_runs_and_the_summary_closes(errexit: bool) -> None:
    r = _bash(FAKE, errexit)
    out = r.stdout
    for word in ("first-ran", "second-start", "third-ran", "fourth-ran"):
        assert word in out, (word, out, r.stderr)
    assert "second-NOT-REACHED" not in out  # a block stops at its own first failure
    got = _summary(out)
    assert [(k, v[0]) for k, v in got.items()] == [
        ("one block", "PASS"), ("two", "FAIL"), ("three", "PASS"), ("four", "FAIL")]
    assert got["three"][1] >= 1  # seconds are the block's own
    assert "2 of 4 blocks FAILED" in out
    if errexit:  # ci_summary's failure ends a `set -e` script with status 1
        assert r.returncode == 1 and "summary-rc" not in out
    else:
        assert "summary-rc=1" in out and r.returncode == 0


def test_all_pass_exits_zero() -> None:
    r = _bash('ok() { true; }\nrun_block a ok\nrun_block b ok\nci_summary', errexit=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [v[0] for v in _summary(r.stdout).values()] == ["PASS", "PASS"]
    assert "all 2 blocks passed" in r.stdout


def test_unset_variable_and_pipe_fail_a_block() -> None:
    script = ('u() { echo "$NO_SUCH_VARIABLE_h18"; }\np() { false | true; }\n'
              "run_block u u\nrun_block p p\nci_summary")
    r = _bash(script, errexit=False)
    assert r.returncode == 1
    assert [v[0] for v in _summary(r.stdout).values()] == ["FAIL", "FAIL"]


def test_ci_run_runs_every_block_through_the_runner() -> None:
    text = RUN.read_text()
    assert ". .ci/blocks.sh" in text
    defined = re.findall(r"^([a-z_0-9]+)\(\) \{", text, flags=re.M)
    run = re.findall(r'^run_block "[^"]+" ([a-z_0-9]+)$', text, flags=re.M)
    assert defined and sorted(defined) == sorted(run), (defined, run)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[-1] == "ci_summary"  # its status is the script's
    # no `set -e` in force when the blocks run (the setup's is switched off again)
    top = [ln.strip() for ln in text.splitlines() if re.match(r"set [-+]", ln)]
    assert top[-1] == "set +e", top
    assert subprocess.run(["bash", "-n", str(RUN)], timeout=30).returncode == 0
