"""Shared plumbing for the deployment tests: the linters' environment and YAML loading.

The linters (hadolint, checkov, kubernetes-validate, check-jsonschema) are installed by
scripts/setup --test into .venv-tools, apart from the project's .venv; a missing tool fails the test
with the command that installs it, it never skips.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SCHEMAS = DEPLOY / "schemas"
COMPOSE = DEPLOY / "compose.yaml"
#: compose.yaml and any override or variant beside it.
COMPOSE_FILES = sorted(DEPLOY.glob("compose*.y*ml"))
DOCKERFILE = REPO / "Dockerfile"
PACKAGES_APT = REPO / "packages.apt"
OPERATIONS_DOC = REPO / "docs" / "operations.md"
TOOLS_BIN = REPO / ".venv-tools" / "bin"
HELPER = Path(__file__).with_name("tools_helper.py")

#: Every Kubernetes manifest, including the ones kustomization.yaml does not apply.
MANIFESTS = sorted(KUBERNETES.rglob("*.yaml"))
#: What `kubectl apply -k deploy/kubernetes` applies.
KUSTOMIZATION = KUBERNETES / "kustomization.yaml"


def tool(name: str) -> Path:
    path = TOOLS_BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/setup --test (it installs the linters)")
    return path


def run_tool(name: str, *args: str, stdin: str | None = None, timeout: float = 240) -> Any:
    return subprocess.run(
        [str(tool(name)), *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def checkov(framework: str, *target: str) -> tuple[Any, dict[str, Any], list[str]]:
    """Run checkov offline on ``target``; the process, its JSON report, and what failed."""
    result = run_tool(
        "checkov", "--skip-download", "--output", "json", "--framework", framework, *target
    )
    report = json.loads(result.stdout)
    failed = [
        f"{check['check_id']} {check['check_name']} ({check['resource']})"
        for check in report["results"]["failed_checks"]
    ]
    return result, report, failed


def _helper(*args: str, stdin: str | None = None) -> Any:
    result = run_tool("python", str(HELPER), *args, stdin=stdin, timeout=120)
    if result.returncode != 0:
        pytest.fail(f"tools_helper {args[0]} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def load_yaml(*files: Path) -> dict[Path, list[Any]]:
    """The documents of each YAML file (PyYAML lives in .venv-tools)."""
    loaded = _helper("load", *(str(path) for path in files))
    return {Path(name): docs for name, docs in loaded.items()}


@pytest.fixture(scope="session")
def yaml_docs() -> dict[Path, list[Any]]:
    """Every YAML file under deploy/, parsed once."""
    return load_yaml(*COMPOSE_FILES, *MANIFESTS)


@pytest.fixture(scope="session")
def validate() -> Callable[[Path, list[Any]], list[list[str]]]:
    """validate(schema, documents) -> one list of error messages per document."""

    def run(schema: Path, documents: list[Any]) -> list[list[str]]:
        errors: list[list[str]] = _helper("validate", str(schema), stdin=json.dumps(documents))
        return errors

    return run


@pytest.fixture(scope="session")
def applied(yaml_docs: dict[Path, list[Any]]) -> list[dict[str, Any]]:
    """The resources `kubectl apply -k deploy/kubernetes` creates (without the namespace
    transformer, which the manifests already match)."""
    (kustomization,) = yaml_docs[KUSTOMIZATION]
    resources = []
    for name in kustomization["resources"]:
        resources.extend(yaml_docs[KUBERNETES / name])
    return resources


def pod_specs(resources: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for resource in resources:
        if resource["kind"] in {"Deployment", "StatefulSet"}:
            yield resource["metadata"]["name"], resource["spec"]["template"]["spec"]


def by_kind(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


#: The Redis users both deployments load (docs/operations.md#redis-users).
REDIS_USERS = DEPLOY / "redis" / "users.conf"


@dataclass(frozen=True)
class RedisStart:
    """What a Redis container's start script did: the config file it wrote and the mode of
    that file, and the arguments and environment ``redis-server`` was executed with."""

    auth_conf: str
    auth_conf_mode: int
    argv: list[str]
    environ: dict[str, str]


def run_redis_start(script: str, tmp_path: Path, env: dict[str, str]) -> RedisStart:
    """Run a Redis container's start script with ``redis-server`` replaced by a recorder, its
    paths (users.conf, the mounted Secret, /tmp/auth.conf) moved under ``tmp_path``."""
    secrets = tmp_path / "secrets"
    auth = tmp_path / "auth.conf"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = bin_dir / "redis-server"
    recorder.write_text(
        "#!/usr/bin/python3\nimport json, os, sys\n"
        f"open({str(tmp_path / 'exec.json')!r}, 'w').write("
        "json.dumps({'argv': sys.argv[1:], 'environ': dict(os.environ)}))\n"
    )
    recorder.chmod(0o755)
    script = (
        script.replace("/etc/redis/airlock/users.conf", str(REDIS_USERS))
        .replace("/run/secrets/redis/", f"{secrets}/")
        .replace("/tmp/auth.conf", str(auth))
    )
    subprocess.run(
        ["sh", "-ec", script],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
        check=True,
        timeout=30,
    )
    executed = json.loads((tmp_path / "exec.json").read_text())
    return RedisStart(auth.read_text(), auth.stat().st_mode & 0o777, **executed)


def assert_users_with_passwords(started: RedisStart, worker: str, client: str) -> None:
    """Each password on its own user's line, in a file only Redis's uid reads, and the default
    user left without a password and off: what both deployments' start scripts must write."""
    users = {
        line.split()[1]: line for line in started.auth_conf.splitlines() if line.startswith("user")
    }
    assert set(users) == {"default", "worker", "client"}
    assert users["worker"].endswith(f" >{worker}") and users["client"].endswith(f" >{client}")
    assert ">" not in users["default"] and " on " not in users["default"]
    assert started.auth_conf_mode == 0o600
