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

from tests.deploy.conftest import (
    COMPOSE,
    KUBERNETES,
    REDIS_USERS,
    SCHEMAS,
    TOOLS_BIN,
    RedisStart,
    assert_users_with_passwords,
    run_redis_start,
    run_tool,
)

SCHEMA = SCHEMAS / "compose-spec.json"
AIRLOCK_SERVICES = ("light-worker", "ocr-worker", "bridge")
WORKERS = ("light-worker", "ocr-worker")

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


@pytest.mark.parametrize("name", AIRLOCK_SERVICES)
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
    assert members == {"redis", *AIRLOCK_SERVICES, "flower"}


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
    assert service["command"] == ["worker", "-Q", "airlock.ocr"]
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


def test_redis_is_durable_password_protected_and_unpublished(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    script = redis["command"][-1]
    assert "--appendonly yes" in script
    assert "--maxmemory-policy noeviction" in script
    # The passwords go into a config file in memory (test_redis_users_get_their_passwords),
    # never an argument (visible in `ps` on the host).
    assert "requirepass" not in script and "PASSWORD" not in script.split("exec redis-server")[1]
    environment = redis["environment"]
    assert environment["REDIS_PASSWORD"].startswith("${AIRLOCK_REDIS_PASSWORD:?")
    assert environment["REDIS_CLIENT_PASSWORD"].startswith("${AIRLOCK_REDIS_CLIENT_PASSWORD:?")
    assert "ports" not in redis
    # users.conf is the file the Kubernetes ConfigMap copies (test_kubernetes checks).
    assert redis["volumes"] == [
        "redis-data:/data",
        "./redis/users.conf:/etc/redis/airlock/users.conf:ro",
    ]
    assert (COMPOSE.parent / "redis" / "users.conf").resolve() == REDIS_USERS
    assert redis["read_only"] is True and redis["cap_drop"] == ["ALL"]
    # The default user is off: the health check names its user too.
    health = redis["healthcheck"]["test"][1]
    assert 'REDISCLI_AUTH="$$REDIS_PASSWORD" redis-cli --user worker ping' in health
    # Compose cannot inject environment-sourced secrets into a read-only container.
    assert "secrets" not in redis
    for name in AIRLOCK_SERVICES:
        assert redis_url(compose, name).startswith("redis://worker:${AIRLOCK_REDIS_PASSWORD:?")
        assert compose["services"][name]["depends_on"]["redis"]["condition"] == "service_healthy"
    flower = compose["services"]["flower"]["environment"]["CELERY_BROKER_URL"]
    assert flower.startswith("redis://worker:${AIRLOCK_REDIS_PASSWORD:?")


def test_redis_users_get_their_passwords_in_memory_only(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    """The start script run with redis-server recorded: each password on its own user's line
    of a file only Redis's uid reads, and neither left in the server's environment."""
    script = compose["services"]["redis"]["command"][-1].replace("$$", "$")
    env = {"REDIS_PASSWORD": "w0rker", "REDIS_CLIENT_PASSWORD": "cl1ent"}
    started: RedisStart = run_redis_start(script, tmp_path, env)
    assert_users_with_passwords(started, "w0rker", "cl1ent")
    assert started.argv[:2] == ["--include", str(tmp_path / "auth.conf")]
    assert not {"REDIS_PASSWORD", "REDIS_CLIENT_PASSWORD"} & set(started.environ)
    assert not any(secret in " ".join(started.argv) for secret in env.values())


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
        if name != "flower":
            assert "profiles" not in service, f"{name} must start without a profile"


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
            assert environment[key] == "${AIRLOCK_OCR_LANGUAGE:-eng}"
        else:
            assert environment[key] == value, key
