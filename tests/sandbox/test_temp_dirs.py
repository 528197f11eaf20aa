"""Directories named after their owner's pid are reclaimed only once that owner is gone."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from sandbox import temp_dirs

PREFIX = "airlock-test-"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_dead_owners_directory_is_reclaimed_a_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"{PREFIX}{_dead_pid()}-a"
    (dead / "pymp-x" / "deep").mkdir(parents=True)
    live = tmp_path / f"{PREFIX}1-b"  # pid 1 started before this directory was made
    live.mkdir()
    ours = tmp_path / f"{PREFIX}{os.getpid()}-c"
    ours.mkdir()
    other = tmp_path / "pymp-unrelated"
    other.mkdir()
    assert temp_dirs.reclaim(PREFIX, str(tmp_path)) == 1
    assert {path.name for path in tmp_path.iterdir()} == {live.name, ours.name, other.name}


def test_a_pid_reused_since_does_not_keep_a_directory(tmp_path: Path) -> None:
    """A directory older than the process now holding its pid was a dead process's."""
    reused = tmp_path / f"{PREFIX}1-old"
    reused.mkdir()
    with open("/proc/stat") as file:
        boot = next(float(line.split()[1]) for line in file if line.startswith("btime "))
    os.utime(reused, (boot - 3600, boot - 3600))
    assert temp_dirs.reclaim(PREFIX, str(tmp_path)) == 1
    assert not reused.exists()


def test_claim_makes_a_directory_named_after_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = Path(temp_dirs.claim(PREFIX, 0o711))
    assert path.parent == tmp_path
    assert path.name.startswith(f"{PREFIX}{os.getpid()}-")
    assert path.stat().st_mode & 0o777 == 0o711
