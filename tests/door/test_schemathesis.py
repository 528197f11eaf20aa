"""schemathesis against the OpenAPI document ``airlock serve`` serves, every operation, with a
key: no 5xx, every status and content type documented, every body as its schema says, and a
deleted job gone. (Its check that schema-valid input is never refused is left out: a file
over a ``max_bytes`` the same request lowered is schema-valid and rightly a 413.)"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.door.serving import Door

pytestmark = pytest.mark.slow

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


def test_every_operation_holds_to_its_openapi_document(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"fuzz {hashlib.sha256(b'fuzz-key').hexdigest()}\n")
    door = Door({"AIRLOCK_HTTP_KEYS_FILE": str(keys)}, tmp_path)
    try:
        run = subprocess.run(
            [
                str(SCHEMATHESIS), "run", f"{door.url}/openapi.json",
                "-H", "Authorization: Bearer fuzz-key",
                "--max-examples", "25",
                "--seed", "20261205",
                "--request-timeout", "120",
                "--exclude-checks", "positive_data_acceptance",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "NO_COLOR": "1"},
            cwd=tmp_path,  # its cache of found crashes stays out of the checkout
            check=False,
        )  # fmt: skip
    finally:
        door.stop()
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    # Every operation of the document selected and tested.
    selected = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", run.stdout)
    assert selected is not None, run.stdout[-3000:]
    assert len(set(selected.groups())) == 1, selected.group(0)
