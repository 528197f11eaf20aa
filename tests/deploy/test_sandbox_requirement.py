"""The sandbox requirement the deployments set holds on this host, checked by the real CLI.

The Dockerfile, the compose files and the Kubernetes manifests each set
``AIRLOCK_SANDBOX_REQUIRE``; the image's HEALTHCHECK is ``airlock doctor`` under it. Its probes
skip layers on purpose, which once clashed with the requirement: every container's health
check crashed. Each list is read from the files themselves, so a change to any of them is
tested as it ships.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import COMPOSE_FILES, DOCKERFILE, MANIFESTS
from tests.deploy.dockerfile_stages import stages

VARIABLE = "AIRLOCK_SANDBOX_REQUIRE"
AIRLOCK = Path(sys.executable).parent / "airlock"


def _dockerfile_values() -> list[str]:
    """The runtime stage's ENV values of the variable, as Docker reads ``ENV A=1 B=2``."""
    return [
        value
        for keyword, arguments in stages(DOCKERFILE.read_text())[-1]
        if keyword == "ENV"
        for name, _, value in (word.partition("=") for word in shlex.split(arguments))
        if name == VARIABLE
    ]


def _yaml_values(node: Any) -> Iterator[str]:
    """Every value of the variable in a document: a mapping (compose ``environment``, a
    ConfigMap's ``data``), a Kubernetes ``env`` entry, or a compose ``KEY=VALUE`` list item."""
    if isinstance(node, dict):
        if VARIABLE in node:
            yield str(node[VARIABLE])
        if node.get("name") == VARIABLE and "value" in node:
            yield str(node["value"])
        for child in node.values():
            yield from _yaml_values(child)
    elif isinstance(node, list):
        for child in node:
            yield from _yaml_values(child)
    elif isinstance(node, str) and node.startswith(f"{VARIABLE}="):
        yield node.partition("=")[2]


@pytest.fixture(scope="module")
def requirements(yaml_docs: dict[Path, list[Any]]) -> dict[str, set[str]]:
    """Each source (Dockerfile, compose, Kubernetes) and the distinct lists it sets."""
    compose = {v for path in COMPOSE_FILES for doc in yaml_docs[path] for v in _yaml_values(doc)}
    kubernetes = {v for path in MANIFESTS for doc in yaml_docs[path] for v in _yaml_values(doc)}
    return {"Dockerfile": set(_dockerfile_values()), "compose": compose, "kubernetes": kubernetes}


def _names(value: str) -> list[str]:
    return sorted(name.strip() for name in value.split(",") if name.strip())


def test_every_deployment_sets_the_same_requirement(requirements: dict[str, set[str]]) -> None:
    for source, values in requirements.items():
        assert values, f"{source} no longer sets {VARIABLE}"
    distinct = {tuple(_names(value)) for values in requirements.values() for value in values}
    assert len(distinct) == 1, requirements


@pytest.mark.slow
def test_doctor_passes_under_each_deployed_requirement(requirements: dict[str, set[str]]) -> None:
    """``airlock doctor``, the real command, with exactly the environment value shipped."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("AIRLOCK_")}
    for value in sorted(set().union(*requirements.values())):
        env = {**clean, VARIABLE: value}
        # As root the uid drop is required on top of any list (a job never parses as root).
        required = sorted({*_names(value), *(["uid_drop"] if os.geteuid() == 0 else [])})
        text = subprocess.run(
            [str(AIRLOCK), "doctor"], capture_output=True, text=True, env=env, timeout=120
        )
        assert text.returncode == 0, text.stderr
        assert f"required ({VARIABLE}): {', '.join(required)}\n" in text.stdout
        assert "TCP connect to 127.0.0.1 with all layers: blocked" in text.stdout
        as_json = subprocess.run(
            [str(AIRLOCK), "doctor", "--json"], capture_output=True, text=True, env=env, timeout=120
        )
        assert as_json.returncode == 0, as_json.stderr
        report = json.loads(as_json.stdout)
        assert report["required"] == required and report["missing_required"] == []
        assert report["healthy"] and report["tcp_blocked"]
        # Every network layer was still attacked alone, the required ones included.
        assert {check["layer"] for check in report["network_layers"]} == {
            "seccomp",
            "landlock",
            "netns",
        }
        assert all(check["blocks_tcp"] for check in report["network_layers"])


def test_doctor_as_root_reports_a_failed_uid_drop_instead_of_crashing() -> None:
    """A uid base with no valid uid above it: the drop fails, as in a user namespace that maps
    no spare uids. Jobs are refused, and the doctor says why and exits 1."""
    assert os.geteuid() == 0, "this suite runs as root"
    clean = {key: value for key, value in os.environ.items() if not key.startswith("AIRLOCK_")}
    env = {**clean, "AIRLOCK_SANDBOX_UID_BASE": str(2**32 - 1)}
    done = subprocess.run(
        [str(AIRLOCK), "doctor"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "MISSING uid_drop" in done.stdout
    assert "Traceback" not in done.stderr
