"""scripts/apt-install, which the README's commands run on a fresh machine, waits for another
apt-get holding apt's locks (unattended upgrades do, right after boot) instead of failing:
the README's test command once died in three seconds that way."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs Debian packages: root")

#: apt-get update's lock: the one DPkg::Lock::Timeout does not cover.
LISTS_LOCK = Path("/var/lib/apt/lists/lock")


def test_a_held_apt_lock_is_waited_for_and_named() -> None:
    with LISTS_LOCK.open("w") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)  # apt's own kind of lock, as another apt-get holds it
        installing = subprocess.Popen(
            [str(REPO_ROOT / "scripts" / "apt-install"), "bash"],  # installed: a no-op
            stderr=subprocess.PIPE,
            text=True,
        )
        assert installing.stderr is not None
        said = installing.stderr.readline()  # the script waits, saying so, until it is free
        assert "another package manager holds apt's lock" in said
        assert f"held by process {os.getpid()}" in said
        assert installing.poll() is None, "it gave up while the lock was held"
    assert installing.wait(timeout=600) == 0, installing.stderr.read()


def test_a_lock_held_past_the_wait_fails_with_apts_own_words() -> None:
    with LISTS_LOCK.open("w") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        failed = subprocess.run(
            [str(REPO_ROOT / "scripts" / "apt-install"), "bash"],
            capture_output=True,
            text=True,
            env={**os.environ, "AIRLOCK_APT_WAIT_SECONDS": "0"},
            timeout=600,
            check=False,
        )
    assert failed.returncode != 0
    assert "Could not get lock /var/lib/apt/lists/lock" in failed.stderr
