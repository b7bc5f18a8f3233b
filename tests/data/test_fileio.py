"""rtx._fileio.atomic_write: all or nothing, the previous file kept on failure."""

from __future__ import annotations

import os
import stat

import pytest

from rtx._fileio import atomic_write


def test_writes_and_replaces(tmp_path):
    p = tmp_path / "f.txt"
    with atomic_write(p, "w") as fh:
        fh.write("one")
    assert p.read_text() == "one"
    with atomic_write(p, "wb") as fh:
        fh.write(b"two")
    assert p.read_bytes() == b"two"
    assert sorted(os.listdir(tmp_path)) == ["f.txt"]  # no temporary file left


def test_failure_keeps_previous_file(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(b"previous")
    with pytest.raises(RuntimeError, match="midway"):
        with atomic_write(p) as fh:
            fh.write(b"partial")
            raise RuntimeError("midway")
    assert p.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]


def test_failure_without_previous_file_leaves_nothing(tmp_path):
    p = tmp_path / "new.bin"
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(p) as fh:
            fh.write(b"x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_permissions(tmp_path):
    p = tmp_path / "f"
    with atomic_write(p) as fh:
        fh.write(b"a")
    old = os.umask(0o022)
    os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~old  # as a plain open() gives
    os.chmod(p, 0o640)
    with atomic_write(p) as fh:
        fh.write(b"b")
    assert stat.S_IMODE(p.stat().st_mode) == 0o640  # the replaced file's mode is kept


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        with atomic_write(tmp_path / "f", "a"):
            pass
