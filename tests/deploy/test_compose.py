"""deploy/compose.yaml: valid against the Compose specification's schema, and the hardening and
topology the operations guide promises."""

from __future__ import annotations

import copy
import filecmp
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from bridge.service import tenants
from tests.deploy.conftest import (
    CLIENTS,
    COMPOSE,
    HOSTILE_CLIENT_NAMES,
    KUBERNETES,
    LONG_CLIENT_NAME,
    REDIS_USERS,
    SCHEMAS,
    TOOLS_BIN,
    RedisStart,
    assert_users_with_passwords,
    refused_redis_start,
    run_redis_start,
    run_tool,
)
from tests.redis_server import DEPLOYED_REDIS_PORT

SCHEMA = SCHEMAS / "compose-spec.json"
AIRLOCK_SERVICES = ("light-worker", "ocr-worker", "bridge")
WORKERS = ("light-worker", "ocr-worker")
#: The `sentinel` profile (tests/deploy/test_sentinel.py): two Redis nodes, three Sentinels,
#: and the airlock services again, finding the primary through the Sentinels.
SENTINEL_PROFILE = (
    "redis-1",
    "redis-2",
    "sentinel-1",
    "sentinel-2",
    "sentinel-3",
    *(f"{name}-sentinel" for name in AIRLOCK_SERVICES),
)

Validate = Callable[[Path, list[Any]], list[list[str]]]


@pytest.fixture(scope="module")
def compose(yaml_docs: dict[Path, list[Any]]) -> dict[str, Any]:
    (document,) = yaml_docs[COMPOSE]
    return cast(dict[str, Any], document)


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m|h)", duration)
    assert match, f"unsupported duration {duration!r}"
    value, unit = int(match[1]), match[2]
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def test_valid_against_the_compose_specification(
    compose: dict[str, Any], validate: Validate
) -> None:
    assert validate(SCHEMA, [compose]) == [[]]


def test_check_jsonschema_agrees_on_the_file_itself() -> None:
    """The same schema applied by another validator, to the YAML text rather than our parse."""
    result = run_tool("check-jsonschema", "--schemafile", str(SCHEMA), str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_vendored_schema_is_the_one_check_jsonschema_ships() -> None:
    """deploy/schemas/compose-spec.json is check-jsonschema's vendored copy of the Compose
    specification's schema (Apache-2.0, LICENSE.compose-spec beside it), byte for byte."""
    shipped = list(
        (TOOLS_BIN.parent / "lib").glob(
            "python3*/site-packages/check_jsonschema/builtin_schemas/vendor/compose-spec.json"
        )
    )
    assert len(shipped) == 1, "check-jsonschema's vendored compose-spec.json was not found"
    assert filecmp.cmp(SCHEMA, shipped[0], shallow=False)
    assert (SCHEMAS / "LICENSE.compose-spec").read_text().lstrip().startswith("Apache License")


@pytest.mark.parametrize(
    ("mutation", "where"),
    [
        (lambda c: c["services"]["ocr-worker"].update(stop_grace_periods="210s"), "ocr-worker"),
        (lambda c: c["services"]["redis"]["healthcheck"].update(intervals="10s"), "redis"),
        (lambda c: c["networks"]["internal"].update(interal=True), "internal"),
        (lambda c: c["services"]["bridge"].update(cap_drop="ALL"), "bridge"),
    ],
)
def test_the_schema_rejects_a_broken_file(
    compose: dict[str, Any],
    validate: Validate,
    mutation: Callable[[dict[str, Any]], None],
    where: str,
) -> None:
    """The validation above can fail: a misspelt key or a wrong type is caught."""
    broken = copy.deepcopy(compose)
    mutation(broken)
    (errors,) = validate(SCHEMA, [broken])
    assert errors, "the schema accepted a broken compose file"
    assert any(where in error for error in errors), errors


@pytest.mark.parametrize("name", [*AIRLOCK_SERVICES, *(f"{n}-sentinel" for n in AIRLOCK_SERVICES)])
def test_airlock_containers_are_hardened(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]
    assert not service.get("cap_add")
    assert not service.get("privileged")
    tmpfs = service["tmpfs"]
    assert any(entry.startswith("/tmp:") and "noexec" in entry for entry in tmpfs)
    assert service["pids_limit"] > 0
    assert service["mem_limit"] and service["cpus"]
    assert "healthcheck" in service
    # The image's user is kept: nothing here runs airlock as root.
    assert "user" not in service
    assert service["image"].startswith("${AIRLOCK_IMAGE:-airlock:")


@pytest.mark.parametrize("name", WORKERS)
def test_workers_reach_only_redis(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    assert service["networks"] == ["internal"]
    assert "ports" not in service
    assert compose["networks"]["internal"]["internal"] is True
    members = {
        other
        for other, spec in compose["services"].items()
        if "internal" in spec.get("networks", [])
    }
    assert members == {
        "redis", "client-redis", *AIRLOCK_SERVICES, "flower", "door", *SENTINEL_PROFILE
    }  # fmt: skip


@pytest.mark.parametrize("name", WORKERS)
def test_workers_finish_their_task_before_being_stopped(compose: dict[str, Any], name: str) -> None:
    service = compose["services"][name]
    environment = service["environment"]
    hard_limit = float(environment["AIRLOCK_TASK_TIME_LIMIT"])
    assert _seconds(service["stop_grace_period"]) > hard_limit
    assert float(environment["AIRLOCK_VISIBILITY_TIMEOUT"]) > hard_limit
    assert (
        float(environment["AIRLOCK_SANDBOX_WALL_SECONDS"])
        < float(environment["AIRLOCK_TASK_SOFT_TIME_LIMIT"])
        < hard_limit
    )


def test_ocr_workers_scale_with_the_scale_flag(compose: dict[str, Any]) -> None:
    """`docker compose up --scale ocr-worker=4` needs no fixed name and no host port."""
    service = compose["services"]["ocr-worker"]
    assert "container_name" not in service
    assert "ports" not in service
    assert service["command"] == ["worker", "-Q", "airlock.ocr,airlock.pages"]
    assert service["environment"]["AIRLOCK_CONCURRENCY"] == "1"
    assert compose["services"]["light-worker"]["command"] == ["worker", "-Q", "airlock.light"]


def test_worker_health_means_its_own_node_answers_through_the_broker(
    compose: dict[str, Any],
) -> None:
    for name in WORKERS:
        healthcheck = compose["services"][name]["healthcheck"]
        test = healthcheck["test"]
        assert test[:5] == ["CMD", "airlock", "health", "--ready", "--worker"]
        # The check's own timeout covers the ping's timeout plus the CLI's start-up.
        timeout = float(test[test.index("--timeout") + 1])
        assert int(healthcheck["timeout"].rstrip("s")) > timeout


@pytest.mark.parametrize("name", ["redis", "client-redis", "redis-1", "redis-2"])
def test_redis_is_durable_password_protected_and_unpublished(
    compose: dict[str, Any], name: str
) -> None:
    redis = compose["services"][name]
    script = redis["command"][-1]
    assert "--appendonly yes" in script
    assert "--maxmemory-policy noeviction" in script
    # The passwords go into a config file in memory (test_redis_users_get_their_passwords),
    # never an argument (visible in `ps` on the host).
    assert "requirepass" not in script and "PASSWORD" not in script.split("exec redis-server")[1]
    environment = redis["environment"]
    assert environment["REDIS_PASSWORD"].startswith("${AIRLOCK_REDIS_PASSWORD:?")
    assert "ports" not in redis
    # users.conf is the file the Kubernetes ConfigMap copies (test_kubernetes checks).
    assert redis["volumes"] == [
        f"{name}-data:/data",
        "./redis/users.conf:/etc/redis/airlock/users.conf:ro",
    ]
    assert (COMPOSE.parent / "redis" / "users.conf").resolve() == REDIS_USERS
    assert redis["read_only"] is True and redis["cap_drop"] == ["ALL"]
    # The default user is off: the health check names its user too.
    health = redis["healthcheck"]["test"][1]
    assert 'REDISCLI_AUTH="$$REDIS_PASSWORD" redis-cli --user worker ping' in health
    # Compose cannot inject environment-sourced secrets into a read-only container.
    assert "secrets" not in redis
    for service in AIRLOCK_SERVICES:
        assert redis_url(compose, service).startswith("redis://worker:${AIRLOCK_REDIS_PASSWORD:?")
        depends = compose["services"][service]["depends_on"]
        assert depends["redis"]["condition"] == "service_healthy"
    flower = compose["services"]["flower"]["environment"]["CELERY_BROKER_URL"]
    assert flower.startswith("redis://worker:${AIRLOCK_REDIS_PASSWORD:?")


def test_clients_reach_only_their_own_redis_and_the_bridge_both(compose: dict[str, Any]) -> None:
    """The workers' Redis has no client user and is not on the clients' network; the clients'
    Redis has the tenants, and the bridge is the only airlock service told to use it."""
    services = compose["services"]
    assert services["redis"]["environment"]["REDIS_CLIENTS"] == ""
    assert services["redis"]["networks"] == ["internal"]
    assert services["client-redis"]["environment"]["REDIS_CLIENTS"] == "${AIRLOCK_REDIS_CLIENTS:-}"
    assert services["client-redis"]["networks"] == ["internal", "clients"]
    members = {name for name, spec in services.items() if "clients" in spec.get("networks", [])}
    assert members == {"client-redis"}
    for name in AIRLOCK_SERVICES:
        url = services[name]["environment"].get("AIRLOCK_CLIENT_REDIS_URL")
        if name == "bridge":
            assert url.startswith("redis://worker:${AIRLOCK_REDIS_PASSWORD:?")
            assert url.endswith(f"@client-redis:{DEPLOYED_REDIS_PORT}/0")
            assert services[name]["depends_on"]["client-redis"]["condition"] == "service_healthy"
        else:
            assert url is None, name


def test_redis_users_get_their_passwords_in_memory_only(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """The start script run with redis-server recorded: each password on its own user's line
    of a file only Redis's uid reads, one user per client tenant, and no password left in the
    server's environment."""
    script = compose["services"]["redis"]["command"][-1].replace("$$", "$")
    clients = " ".join(f"{name}:{password}" for name, password in CLIENTS.items())
    env = {"REDIS_PASSWORD": "w0rker", "REDIS_CLIENTS": clients}
    started: RedisStart = run_redis_start(script, tmp_path, env)
    assert_users_with_passwords(started, "w0rker", CLIENTS)
    assert started.argv[:2] == ["--include", str(tmp_path / "auth.conf")]
    assert not {"REDIS_PASSWORD", "REDIS_CLIENTS"} & set(started.environ)
    assert not any(secret in " ".join(started.argv) for secret in [*CLIENTS.values(), "w0rker"])


@pytest.mark.parametrize(
    "clients",
    [
        *(f"{name}:s3cret" for name in (*HOSTILE_CLIENT_NAMES, LONG_CLIENT_NAME)),
        "acme:s3cret acme:0ther",  # the same user twice: both passwords would open it
        "acme",  # no password
        "acme:",
        "acme:pass>word",  # a second ACL rule in the password's place
        "acme:a~*",
    ],
)
def test_the_start_script_refuses_a_client_that_would_widen_an_acl(
    compose: dict[str, Any], tmp_path: Path, clients: str
) -> None:
    """A client name is spliced into key patterns and a password onto an ACL line: either,
    chosen badly, would give one tenant others' keys. Redis is then not started at all."""
    script = compose["services"]["redis"]["command"][-1].replace("$$", "$")
    env = {"REDIS_PASSWORD": "w0", "REDIS_CLIENTS": clients}
    assert "airlock: " in refused_redis_start(script, tmp_path, env)


def redis_url(compose: dict[str, Any], name: str) -> str:
    url: str = compose["services"][name]["environment"]["AIRLOCK_BROKER_URL"]
    return url


def test_flower_is_optional_and_password_protected(compose: dict[str, Any], tmp_path: Path) -> None:
    flower = compose["services"]["flower"]
    assert flower["profiles"] == ["flower"]
    # Compose substitutes variables in services of profiles not started too: a required
    # variable here would stop `up` of the stack without Flower (tests/image runs that `up`).
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == "${FLOWER_BASIC_AUTH:-}"
    assert all(port.startswith("127.0.0.1:") for port in flower["ports"])
    # Flower's command refuses to start it without a password; with one it runs Flower.
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "celery").write_text('#!/bin/sh\necho "celery $*"\n')
    (stubs / "celery").chmod(0o755)
    command = [part.replace("$$", "$") for part in flower["command"]]
    for password, status, output in (("", 1, "set FLOWER_BASIC_AUTH"), ("u:p", 0, "celery flower")):
        env = {"PATH": f"{stubs}:/usr/bin:/bin", "FLOWER_BASIC_AUTH": password}
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        assert (result.returncode, output in result.stdout + result.stderr) == (status, True)
    for name, service in compose["services"].items():
        if name in SENTINEL_PROFILE:
            assert service["profiles"] == ["sentinel"], name
        elif name not in ("flower", "door"):
            assert "profiles" not in service, f"{name} must start without a profile"


def test_the_door_is_optional_keyed_and_on_loopback(compose: dict[str, Any]) -> None:
    """``--profile door``: it listens on the host's loopback only, and its keys come as a
    secret from the environment, never a variable its process sees in clear."""
    door = compose["services"]["door"]
    assert door["profiles"] == ["door"]
    assert door["command"] == ["serve"]
    assert door["ports"] == ["127.0.0.1:8080:8080"]
    assert door["secrets"] == ["airlock-http-keys"]
    assert door["environment"]["AIRLOCK_HTTP_KEYS_FILE"] == "/run/secrets/airlock-http-keys"
    assert compose["secrets"]["airlock-http-keys"] == {
        "file": "${AIRLOCK_HTTP_KEYS_PATH:-/dev/null}"
    }
    assert door["read_only"] is True and door["cap_drop"] == ["ALL"]


def test_compose_and_kubernetes_share_the_same_settings(
    compose: dict[str, Any], yaml_docs: dict[Path, list[Any]]
) -> None:
    config = next(
        doc
        for doc in yaml_docs[KUBERNETES / "config.yaml"]
        if doc["metadata"]["name"] == "airlock-config"
    )["data"]
    environment = compose["services"]["light-worker"]["environment"]
    for key, value in config.items():
        if key == "AIRLOCK_OCR_LANGUAGE":
            assert environment[key] == f"${{AIRLOCK_OCR_LANGUAGE:-{value}}}"
        else:
            assert environment[key] == value, key


def test_the_client_template_grants_exactly_the_keys_the_bridge_uses() -> None:
    """users.conf's client line and bridge.service.tenants spell the same keys: the slots the
    bridge takes requests from (write only, exactly SLOTS of them), the answer key and the
    result stream (read only), and nothing else."""
    (template,) = [
        line for line in REDIS_USERS.read_text().splitlines() if line.startswith("user client-")
    ]
    line = template.replace("{tenant}", "acme")
    keys = sorted(rule for rule in line.split() if "~" in rule)
    slots = f"%W~{tenants.slot_prefix('acme')}[0-{tenants.SLOTS - 1}]"
    answers = f"%R~{tenants.selection_key('acme', '*')}"
    assert keys == sorted([slots, answers, f"%R~{tenants.result_stream('acme')}"])
    assert line.split()[1] == f"{tenants.USER_PREFIX}acme"
    assert "+select" not in line and "+xadd" not in line and "&" not in line
