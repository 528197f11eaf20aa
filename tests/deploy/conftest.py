"""Shared plumbing for the deployment tests: the linters' environment and YAML loading.

The linters (hadolint, checkov, kubernetes-validate, check-jsonschema) are installed by
scripts/setup --test into .venv-tools, apart from the project's .venv; a missing tool fails the test
with the command that installs it, it never skips.
"""

from __future__ import annotations

import copy
import json
import re
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


#: The kustomize component that puts the workers' Redis behind Sentinel.
SENTINEL_COMPONENT = KUBERNETES / "alternatives" / "sentinel"


def _pointer(document: Any, path: str) -> tuple[Any, str]:
    """The container ``path`` (a JSON pointer) ends in, and the last part's key."""
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]
    for part in parents:
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document, last


def _apply_operation(document: Any, operation: dict[str, Any]) -> None:
    """One RFC 6902 operation, of the four the component uses."""
    parent, key = _pointer(document, operation["path"])
    op = operation["op"]
    if isinstance(parent, list):
        index = len(parent) if key == "-" else int(key)
        if op == "add":
            parent.insert(index, operation["value"])
        elif op == "replace":
            parent[index] = operation["value"]
        elif op == "remove":
            del parent[index]
        else:
            assert op == "test" and parent[index] == operation["value"], operation
    elif op in {"add", "replace"}:
        assert op == "add" or key in parent, operation
        parent[key] = operation["value"]
    elif op == "remove":
        del parent[key]
    else:
        assert op == "test" and parent[key] == operation["value"], operation


def render_component(
    base: list[dict[str, Any]], component: Path, scratch: Path
) -> list[dict[str, Any]]:
    """What ``kubectl apply -k`` applies once ``component`` is added to the base: its resources
    beside the base's, its patches applied (RFC 6902 ones by target kind and name pattern, and
    strategic-merge deletions), as kustomize does (checked against ``kubectl kustomize`` where
    kubectl is installed)."""
    ((kustomization,),) = load_yaml(component / "kustomization.yaml").values()
    resources = copy.deepcopy(base)
    for name in kustomization["resources"]:
        resources.extend(*load_yaml(component / name).values())
    for number, entry in enumerate(kustomization["patches"]):
        text = scratch / f"patch{number}.yaml"
        text.write_text(entry["patch"])
        ((patch,),) = load_yaml(text).values()
        if isinstance(patch, dict):  # a strategic-merge patch: the component only deletes
            assert patch.pop("$patch") == "delete", patch
            resources = [
                r
                for r in resources
                if (r["kind"], r["metadata"]["name"]) != (patch["kind"], patch["metadata"]["name"])
            ]
            continue
        target = entry["target"]
        matched = [
            r
            for r in resources
            if r["kind"] == target["kind"] and re.fullmatch(target["name"], r["metadata"]["name"])
        ]
        assert matched, f"patch {number} targets nothing: {target}"
        for resource in matched:
            for operation in patch:
                _apply_operation(resource, operation)
    return resources


@pytest.fixture(scope="session")
def sentinel_applied(
    applied: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    """The resources deploy/kubernetes applies with the Sentinel component added."""
    return render_component(applied, SENTINEL_COMPONENT, tmp_path_factory.mktemp("component"))


def pod_specs(resources: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for resource in resources:
        if resource["kind"] in {"Deployment", "StatefulSet"}:
            yield resource["metadata"]["name"], resource["spec"]["template"]["spec"]


def by_kind(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


#: The Redis users both deployments load (docs/operations.md#redis-users).
REDIS_USERS = DEPLOY / "redis" / "users.conf"
#: The Sentinels' users, in both deployments' Sentinel variants (docs/operations.md#sentinel).
SENTINEL_USERS = DEPLOY / "redis" / "sentinel-users.conf"


@dataclass(frozen=True)
class RedisStart:
    """What a Redis (or Sentinel) container's start script did: the config file it wrote
    (``auth.conf``, or a Sentinel's ``sentinel.conf``) and the mode of that file, and the
    arguments and environment ``redis-server`` (``redis-sentinel``) was executed with."""

    auth_conf: str
    auth_conf_mode: int
    argv: list[str]
    environ: dict[str, str]


def _start(script: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    secrets = tmp_path / "secrets"
    auth = tmp_path / "auth.conf"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for server in ("redis-server", "redis-sentinel"):
        recorder = bin_dir / server
        recorder.write_text(
            "#!/usr/bin/python3\nimport json, os, sys\n"
            f"open({str(tmp_path / 'exec.json')!r}, 'w').write("
            "json.dumps({'argv': sys.argv[1:], 'environ': dict(os.environ)}))\n"
        )
        recorder.chmod(0o755)
    script = (
        script.replace("/etc/redis/airlock/users.conf", str(REDIS_USERS))
        .replace("/etc/redis/airlock/sentinel-users.conf", str(SENTINEL_USERS))
        .replace("/run/secrets/redis-clients/", f"{secrets}/clients/")
        .replace("/run/secrets/redis-ha/", f"{secrets}/ha/")
        .replace("/run/secrets/redis/", f"{secrets}/")
        .replace("/tmp/auth.conf", str(auth))
        .replace("/tmp/sentinel.conf", str(tmp_path / "sentinel.conf"))
    )
    return subprocess.run(
        ["sh", "-ec", script],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def run_redis_start(
    script: str, tmp_path: Path, env: dict[str, str], written: str = "auth.conf"
) -> RedisStart:
    """Run a Redis container's start script with ``redis-server`` (and ``redis-sentinel``)
    replaced by a recorder, its paths (users.conf, sentinel-users.conf, the mounted Secrets,
    /tmp/auth.conf, /tmp/sentinel.conf) moved under ``tmp_path``: the worker password at
    ``secrets/password``, the clients' at ``secrets/clients/<name>``, a Sentinel deployment's
    at ``secrets/ha/<key>``. ``written``: the config file the script writes."""
    run = _start(script, tmp_path, env)
    assert run.returncode == 0, run.stderr
    executed = json.loads((tmp_path / "exec.json").read_text())
    conf = tmp_path / written
    return RedisStart(conf.read_text(), conf.stat().st_mode & 0o777, **executed)


def refused_redis_start(script: str, tmp_path: Path, env: dict[str, str]) -> str:
    """Run the start script expecting it to refuse: its stderr, once it is known that it
    exited non-zero without starting ``redis-server``."""
    run = _start(script, tmp_path, env)
    assert run.returncode != 0, "the start script accepted it"
    assert not (tmp_path / "exec.json").exists(), "redis-server was started"
    return str(run.stderr)


#: The client tenants the start-script tests give, with their passwords.
CLIENTS = {"acme": "cl1ent", "b-2": "0ther"}

#: Client names a start script must refuse: each would widen a tenant's key patterns to other
#: tenants' keys (``*``, ``?``, ``[``), add ACL rules of its own (a space, ``~``, ``%``), or break
#: the name rule the bridge reads tenants by.
HOSTILE_CLIENT_NAMES = ("*", "a*", "a?", "a[b]", "ACME", "a b", "a~*", "%RW~*", "-a", "a-", "")
#: One character over the 32 a name may have.
LONG_CLIENT_NAME = "x" * 33


def assert_users_with_passwords(started: RedisStart, worker: str, clients: dict[str, str]) -> None:
    """Each password on its own user's line, in a file only Redis's uid reads, each client
    tenant a user of its own with its name in its key patterns, and the default user left
    without a password and off: what both deployments' start scripts must write."""
    users = {
        line.split()[1]: line for line in started.auth_conf.splitlines() if line.startswith("user")
    }
    assert set(users) == {"default", "worker", *(f"client-{name}" for name in clients)}
    assert users["worker"].endswith(f" >{worker}")
    for name, password in clients.items():
        line = users[f"client-{name}"]
        assert line.endswith(f" >{password}") and "{tenant}" not in line
        assert f"%W~airlock:tenant:{name}:in:[0-7] " in line
    assert ">" not in users["default"] and " on " not in users["default"]
    assert started.auth_conf_mode == 0o600
