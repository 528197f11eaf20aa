"""docs/operations.md stays in step with the deployment files and the code: every anchor a
manifest points at exists, every variable the deployments set is documented, every command
they run exists, every metric is explained."""

from __future__ import annotations

import re

import pytest

from tests.deploy.conftest import (
    COMPOSE,
    DEPLOY,
    DOCKERFILE,
    MANIFESTS,
    OPERATIONS_DOC,
    REDIS_USERS,
    REPO,
    SENTINEL_USERS,
)

DEPLOY_FILES = [DOCKERFILE, COMPOSE, *MANIFESTS]
METRICS = (
    "airlock_tasks_total{kind,outcome}",
    "airlock_rejections_total{reason_class}",
    "airlock_sandbox_kills_total{cause}",
    "airlock_extraction_seconds{kind}",
    "airlock_ocr_pages_total",
    "airlock_queue_depth{queue}",
    "airlock_payload_bytes_total{kind}",
)
#: Variables only the deployment files use (compose interpolation, the Secret's value).
DEPLOY_ONLY = {
    "AIRLOCK_REDIS_USER",
    "AIRLOCK_REDIS_PASSWORD",
    "AIRLOCK_REDIS_CLIENTS",
    "AIRLOCK_REDIS_REPLICA_PASSWORD",
    "AIRLOCK_REDIS_SENTINEL_PASSWORD",
    "AIRLOCK_IMAGE",
    # The file of the door's hashed keys, handed to compose as a secret (deploy/compose.yaml).
    "AIRLOCK_HTTP_KEYS_PATH",
}
#: Read by code another engineer is writing; the check runs as soon as some code reads it.
PENDING_VARIABLES: dict[str, str] = {}
PENDING_COMMANDS = {"bridge": "the Redis Streams bridge service"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def _anchors() -> set[str]:
    return {
        _slug(line.lstrip("#"))
        for line in OPERATIONS_DOC.read_text().splitlines()
        if line.startswith("#")
    }


def _variables() -> set[str]:
    found: set[str] = set()
    for path in DEPLOY_FILES:
        found.update(re.findall(r"\bAIRLOCK_[A-Z_]+[A-Z]\b", path.read_text()))
    return found


def _source_text() -> str:
    return "\n".join(
        path.read_text()
        for package in ("bridge", "sandbox", "worker")
        for path in sorted((REPO / package).rglob("*.py"))
    )


def test_the_guide_has_every_section() -> None:
    anchors = _anchors()
    for section in (
        "architecture",
        "images",
        "sandbox-inside-a-container",
        "one-host-docker-compose",
        "kubernetes",
        "redis",
        "scaling",
        "configuration",
        "secrets",
        "upgrading-without-losing-tasks",
        "threat-model",
        "sizing",
        "metrics",
    ):
        assert section in anchors, section


def test_every_anchor_the_deployment_files_point_at_exists() -> None:
    anchors = _anchors()
    pointers = 0
    for path in DEPLOY_FILES:
        for anchor in re.findall(r"docs/operations\.md#([\w-]+)", path.read_text()):
            pointers += 1
            assert anchor in anchors, f"{path.name}: #{anchor}"
    assert pointers >= 5


def test_the_guide_links_only_to_files_that_exist() -> None:
    text = OPERATIONS_DOC.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (OPERATIONS_DOC.parent / target).exists(), target


def test_every_metric_is_explained() -> None:
    text = OPERATIONS_DOC.read_text()
    metrics_section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    for metric in METRICS:
        assert f"`{metric}`" in metrics_section, metric


def test_sizing_figures_come_from_bench() -> None:
    section = (OPERATIONS_DOC.parent / "sizing.md").read_text()
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    header, *body = rows
    assert [cell.strip() for cell in header.strip("|").split("|")][1:3] == [
        "figure",
        "how measured",
    ]
    assert body
    for row in body:
        figure, how = (cell.strip() for cell in row.strip("|").split("|")[1:3])
        # Every figure is a measurement on this code, and says which script took it.
        assert any(ch.isdigit() for ch in figure) and "see bench/" not in figure, row
        assert "sizing.py" in how or "bench/" in how, row


def test_every_variable_the_deployments_set_is_documented() -> None:
    documented = (REPO / "docs" / "configuration.md").read_text() + OPERATIONS_DOC.read_text()
    for variable in sorted(_variables()):
        assert f"`{variable}`" in documented or variable in DEPLOY_ONLY, variable


@pytest.mark.parametrize("variable", sorted(_variables() - DEPLOY_ONLY))
def test_every_variable_the_deployments_set_is_read_by_airlock(variable: str) -> None:
    if variable not in _source_text():
        if variable in PENDING_VARIABLES:
            pytest.skip(f"{variable}: {PENDING_VARIABLES[variable]} is not written yet")
        pytest.fail(f"{variable} is set by the deployments but read by no code")


def _commands() -> set[str]:
    used = set()
    for path in DEPLOY_FILES:
        text = path.read_text()
        used.update(re.findall(r'args: \["(\w+)"', text))
        used.update(re.findall(r'command: \["(?!airlock")(\w+)"', text))
        # Probes and health checks run the CLI itself: ["airlock", "health", ...].
        used.update(re.findall(r'\["(?:CMD", ")?airlock", "(\w+)"', text))
    used.add("doctor")  # the image's HEALTHCHECK
    return used


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_command_the_deployments_run_exists(command: str) -> None:
    cli = (REPO / "worker" / "cli.py").read_text()
    if not re.search(rf'add_parser\(\s*"{command}"', cli):
        if command in PENDING_COMMANDS:
            pytest.skip(f"`airlock {command}`: {PENDING_COMMANDS[command]} is not written yet")
        pytest.fail(
            f"`airlock {command}` is run by the deployments but the CLI has no such command"
        )


def test_deploy_directory_holds_only_checked_files() -> None:
    """A new file under deploy/ must be picked up by one of these tests."""
    checked = {COMPOSE, *MANIFESTS, REDIS_USERS, SENTINEL_USERS}
    schemas = {"compose-spec.json", "LICENSE.compose-spec", "keda-v1alpha1.json"}
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path not in checked:
            assert path.parent.name == "schemas" and path.name in schemas, path
