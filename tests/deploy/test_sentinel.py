"""The Sentinel variants of both deployments: compose's `sentinel` profile and the kustomize
component deploy/kubernetes/alternatives/sentinel. Each is held to the rules of its single-Redis
form, and its wiring must agree with itself: the master's name and the ports in the workers'
URL, the Sentinels' configuration, the nodes' start scripts and KEDA; every node and every
Sentinel with the users it needs (deploy/redis/users.conf, sentinel-users.conf) and their
passwords in memory only. A real failover with these users: tests/integration/
test_sentinel_failover.py."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from bridge.redis_client import SENTINEL_PORT, SentinelAddress, redis_address
from tests.deploy.conftest import (
    COMPOSE,
    KUBERNETES,
    REDIS_USERS,
    SCHEMAS,
    SENTINEL_COMPONENT,
    SENTINEL_USERS,
    RedisStart,
    by_kind,
    load_yaml,
    pod_specs,
    refused_redis_start,
    run_redis_start,
    run_tool,
)
from tests.deploy.test_kubernetes import KUBERNETES_VERSIONS, WORKERS, assert_locked_down
from tests.redis_server import DEPLOYED_REDIS_PORT

MASTER = "airlock"
QUORUM = 2
REDIS_PORT = DEPLOYED_REDIS_PORT
COMPOSE_NODES = ("redis-1", "redis-2")
COMPOSE_SENTINELS = ("sentinel-1", "sentinel-2", "sentinel-3")
#: Each single-Redis airlock service and its twin in the sentinel profile.
COMPOSE_TWINS = {
    "light-worker": "light-worker-sentinel",
    "ocr-worker": "ocr-worker-sentinel",
    "bridge": "bridge-sentinel",
}
PASSWORDS = {"worker": "w0rker", "replica": "r3plica", "sentinel": "s3ntinel"}
Validate = Callable[[Path, list[Any]], list[list[str]]]


def _users(conf: str) -> dict[str, str]:
    return {line.split()[1]: line for line in conf.splitlines() if line.startswith("user ")}


def _monitor(script: str) -> tuple[str, int, int]:
    """The master's name, port and quorum in a Sentinel start script's ``sentinel monitor``."""
    match = re.search(
        r'"sentinel monitor (\S+) \$\{primary:-\$REDIS_PRIMARY\} (\d+) (\d+)"', script
    )
    assert match, "no sentinel monitor line"
    return match[1], int(match[2]), int(match[3])


def _stub_sentinels(tmp_path: Path) -> None:
    """A ``redis-cli`` that answers ``get-master-addr-by-name`` with ``$STUB_PRIMARY`` (nothing
    when unset: no Sentinel reachable, as on a first start)."""
    stub = tmp_path / "bin" / "redis-cli"
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text(
        '#!/bin/sh\n[ -n "$STUB_PRIMARY" ] || exit 1\nprintf "%s\\n'
        + str(REDIS_PORT)
        + '\\n" "$STUB_PRIMARY"\n'
    )
    stub.chmod(0o755)


def _assert_no_secret_left(started: RedisStart) -> None:
    assert not any(password in " ".join(started.argv) for password in PASSWORDS.values())
    assert not any(
        password in value for value in started.environ.values() for password in PASSWORDS.values()
    )
    assert started.auth_conf_mode == 0o600


def _assert_node_users(started: RedisStart) -> None:
    users = _users(started.auth_conf)
    assert set(users) == {"default", "worker", "replica", "sentinel"}
    for user in ("worker", "replica", "sentinel"):
        assert users[user].endswith(f" >{PASSWORDS[user]}"), user
    # Whichever node is the primary, the others log in to it as `replica`.
    assert f"masteruser replica\nmasterauth {PASSWORDS['replica']}\n" in started.auth_conf
    _assert_no_secret_left(started)


def _assert_sentinel_conf(started: RedisStart, primary: str, name: str) -> None:
    conf = started.auth_conf.splitlines()
    users = _users(started.auth_conf)
    assert set(users) == {"default", "worker", "sentinel"}
    assert users["worker"].endswith(f" >{PASSWORDS['worker']}")
    assert users["sentinel"].endswith(f" >{PASSWORDS['sentinel']}")
    assert ">" not in users["default"] and " on " not in users["default"]
    assert f"sentinel monitor {MASTER} {primary} {REDIS_PORT} {QUORUM}" in conf
    assert f"port {SENTINEL_PORT}" in conf and f"sentinel announce-ip {name}" in conf
    for line in (
        f"sentinel auth-user {MASTER} sentinel",
        f"sentinel auth-pass {MASTER} {PASSWORDS['sentinel']}",
        "sentinel sentinel-user sentinel",
        f"sentinel sentinel-pass {PASSWORDS['sentinel']}",
    ):
        assert line in conf, line
    _assert_no_secret_left(started)


def test_the_sentinel_users_file_is_the_one_the_configmap_holds(
    sentinel_applied: list[dict[str, Any]],
) -> None:
    config = by_kind(sentinel_applied, "ConfigMap")["airlock-sentinel-config"]["data"]
    assert config["sentinel-users.conf"] == SENTINEL_USERS.read_text()
    # The workers' user may ask where the primary is, and change nothing.
    worker = _users(SENTINEL_USERS.read_text())["worker"]
    assert "-@all" in worker and "+sentinel|get-master-addr-by-name" in worker
    assert not re.search(r"\+sentinel\|(set|failover|monitor|remove|reset|config)\b", worker)
    replica = _users(REDIS_USERS.read_text())["replica"]
    assert replica.split()[-3:] == ["+psync", "+replconf", "+ping"] and "~" not in replica


# --- compose: the sentinel profile -----------------------------------------------------------


@pytest.fixture(scope="module")
def compose(yaml_docs: dict[Path, list[Any]]) -> dict[str, Any]:
    (document,) = yaml_docs[COMPOSE]
    return cast(dict[str, Any], document)


def _compose_env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as compose would give it, the passwords set."""
    values = {
        "AIRLOCK_REDIS_PASSWORD": PASSWORDS["worker"],
        "AIRLOCK_REDIS_REPLICA_PASSWORD": PASSWORDS["replica"],
        "AIRLOCK_REDIS_SENTINEL_PASSWORD": PASSWORDS["sentinel"],
    }
    return {
        key: re.sub(r"\$\{(\w+)[^}]*\}", lambda m: values.get(m[1], ""), str(value))
        for key, value in service["environment"].items()
    }


def _compose_url(compose: dict[str, Any], service: str) -> SentinelAddress:
    address = redis_address(_compose_env(compose["services"][service])["AIRLOCK_BROKER_URL"])
    assert address is not None, service
    return address


def test_the_profile_runs_the_single_redis_services_through_the_sentinels(
    compose: dict[str, Any],
) -> None:
    """Each airlock service of the profile is its single-Redis twin but for the broker URL (and
    the bridge's check, which reads it): it waits for the Sentinels, never for `redis`."""
    services = compose["services"]
    profile = {name for name, spec in services.items() if spec.get("profiles") == ["sentinel"]}
    assert profile == {*COMPOSE_NODES, *COMPOSE_SENTINELS, *COMPOSE_TWINS.values()}
    for single, twin in COMPOSE_TWINS.items():
        ours, theirs = copy.deepcopy(services[twin]), copy.deepcopy(services[single])
        assert ours.pop("profiles") == ["sentinel"]
        assert set(ours.pop("depends_on")) == {
            *COMPOSE_SENTINELS,
            *theirs.pop("depends_on").keys() - {"redis"},
        }
        environment, single_environment = ours.pop("environment"), theirs.pop("environment")
        assert environment.pop("AIRLOCK_BROKER_URL").startswith("sentinel://worker:")
        single_environment.pop("AIRLOCK_BROKER_URL")
        assert environment == single_environment, twin
        if single == "bridge":
            assert ours.pop("healthcheck")["test"][1:4] == ["airlock", "health", "--ready"]
            theirs.pop("healthcheck")
        assert ours == theirs, twin
    for name in (*COMPOSE_NODES, *COMPOSE_SENTINELS):
        assert services[name]["networks"] == ["internal"] and "ports" not in services[name]
        assert services[name]["read_only"] is True and services[name]["cap_drop"] == ["ALL"]


def test_the_profiles_wiring_agrees(compose: dict[str, Any]) -> None:
    """The workers' URL lists every Sentinel on the port they listen on and the name they
    watch the primary by; the nodes and Sentinels name each other as compose names them."""
    services = compose["services"]
    sentinel_script = services["sentinel-1"]["command"][-1].replace("$$", "$")
    node_script = services["redis-1"]["command"][-1].replace("$$", "$")
    master, port, quorum = _monitor(sentinel_script)
    assert (master, port) == (MASTER, REDIS_PORT) and len(COMPOSE_SENTINELS) // 2 < quorum == QUORUM
    assert "--port" not in node_script  # redis-server's default port
    assert f"get-master-addr-by-name {MASTER} " in node_script
    assert f"-p {SENTINEL_PORT} " in node_script and f'"port {SENTINEL_PORT}"' in sentinel_script
    for twin in COMPOSE_TWINS.values():
        address = _compose_url(compose, twin)
        assert address.sentinels == tuple((name, SENTINEL_PORT) for name in COMPOSE_SENTINELS)
        assert (address.master_name, address.username) == (MASTER, "worker")
        assert address.password == address.sentinel_password == PASSWORDS["worker"]
    for name in COMPOSE_SENTINELS:
        env = _compose_env(services[name])
        assert env["SENTINEL_NAME"] == name
        assert env["REDIS_SENTINELS"].split() == list(COMPOSE_SENTINELS)
        assert env["REDIS_PRIMARY"] in COMPOSE_NODES
        assert services[name]["command"][-1] == services["sentinel-1"]["command"][-1]
        health = services[name]["healthcheck"]["test"][1]
        assert (
            f"-p {SENTINEL_PORT} --user worker sentinel get-master-addr-by-name {MASTER}" in health
        )
    for name in COMPOSE_NODES:
        env = _compose_env(services[name])
        assert env["REDIS_NODE"] == name and env["REDIS_PRIMARY"] in COMPOSE_NODES
        assert env["REDIS_SENTINELS"].split() == list(COMPOSE_SENTINELS)
        # The same start script as the single Redis: one set of users, one set of checks.
        assert services[name]["command"] == services["redis"]["command"]


@pytest.mark.parametrize(
    ("node", "answer", "replica_of"),
    [
        ("redis-1", None, None),  # a first start: the primary is REDIS_PRIMARY
        ("redis-2", None, "redis-1"),
        ("redis-1", "redis-2", "redis-2"),  # back after a failover: a replica of the new one
        ("redis-2", "redis-2", None),
    ],
)
def test_a_compose_node_starts_as_the_sentinels_say(
    compose: dict[str, Any], tmp_path: Path, node: str, answer: str | None, replica_of: str | None
) -> None:
    service = compose["services"][node]
    _stub_sentinels(tmp_path)
    env = {**_compose_env(service), **({"STUB_PRIMARY": answer} if answer else {})}
    started = run_redis_start(service["command"][-1].replace("$$", "$"), tmp_path, env)
    _assert_node_users(started)
    extra = started.argv[started.argv.index("/data") + 1 :]
    assert extra[:2] == ["--replica-announce-ip", node]
    assert extra[2:] == ([] if replica_of is None else ["--replicaof", replica_of, str(REDIS_PORT)])
    # CONFIG stays for the Sentinels' CONFIG REWRITE; the single Redis renames it away.
    assert "CONFIG" not in started.argv


def test_the_single_redis_keeps_config_renamed_away_and_has_no_sentinel_users(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    script = compose["services"]["redis"]["command"][-1].replace("$$", "$")
    started = run_redis_start(script, tmp_path, {"REDIS_PASSWORD": "w0", "REDIS_CLIENTS": ""})
    assert started.argv[-2:] == ["CONFIG", ""] and "--replicaof" not in started.argv
    assert set(_users(started.auth_conf)) == {"default", "worker"}


@pytest.mark.parametrize(("answer", "primary"), [(None, "redis-1"), ("redis-2", "redis-2")])
def test_a_compose_sentinel_watches_the_primary_its_peers_name(
    compose: dict[str, Any], tmp_path: Path, answer: str | None, primary: str
) -> None:
    service = compose["services"]["sentinel-2"]
    _stub_sentinels(tmp_path)
    env = {**_compose_env(service), **({"STUB_PRIMARY": answer} if answer else {})}
    script = service["command"][-1].replace("$$", "$")
    started = run_redis_start(script, tmp_path, env, written="sentinel.conf")
    _assert_sentinel_conf(started, primary, "sentinel-2")
    assert started.argv == [str(tmp_path / "sentinel.conf")]


@pytest.mark.parametrize("service", ["redis-1", "sentinel-1"])
@pytest.mark.parametrize("password", ["", "s3cret ~* +@all", "pass>word"])
def test_a_compose_sentinel_password_that_would_add_a_rule_is_refused(
    compose: dict[str, Any], tmp_path: Path, service: str, password: str
) -> None:
    spec = compose["services"][service]
    env = {**_compose_env(spec), "REDIS_SENTINEL_PASSWORD": password}
    script = spec["command"][-1].replace("$$", "$")
    assert "airlock: " in refused_redis_start(script, tmp_path, env)


# --- Kubernetes: the component ---------------------------------------------------------------


def _container(resources: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (container,) = by_kind(resources, kind)[name]["spec"]["template"]["spec"]["containers"]
    return cast(dict[str, Any], container)


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def test_the_component_renders_as_kubectl_kustomize_renders_it(
    sentinel_applied: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The rendering the tests below check is kustomize's own (kubectl is not a Debian package
    this project installs: where none is on PATH, test_kustomization_* check the lists)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed; the rendering is checked against the files below")
    (tmp_path / "base").symlink_to(KUBERNETES)
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [base]\ncomponents: [base/alternatives/sentinel]\n"
    )
    built = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    (tmp_path / "built.yaml").write_text(built.stdout)
    ((kustomized),) = load_yaml(tmp_path / "built.yaml").values()

    def canonical(resources: list[dict[str, Any]]) -> set[str]:
        return {json.dumps(resource, sort_keys=True) for resource in resources}

    assert canonical(kustomized) == canonical(sentinel_applied)


def test_the_rendered_component_is_valid(
    sentinel_applied: list[dict[str, Any]], validate: Validate, tmp_path: Path
) -> None:
    rendered = tmp_path / "rendered.yaml"
    builtin = [r for r in sentinel_applied if not r["apiVersion"].startswith("keda.sh/")]
    rendered.write_text("\n---\n".join(json.dumps(resource) for resource in builtin))
    args = [arg for version in KUBERNETES_VERSIONS for arg in ("--kubernetes-version", version)]
    result = run_tool("kubernetes-validate", "--strict", *args, str(rendered))
    assert result.returncode == 0, result.stdout + result.stderr
    keda = [r for r in sentinel_applied if r["apiVersion"].startswith("keda.sh/")]
    assert validate(SCHEMAS / "keda-v1alpha1.json", keda) == [[] for _ in keda]


def test_the_rendered_component_keeps_every_rule_of_the_base(
    sentinel_applied: list[dict[str, Any]],
) -> None:
    specs = dict(pod_specs(sentinel_applied))
    pods = {*WORKERS, "airlock-bridge", "airlock-door", "airlock-redis", "airlock-client-redis"}
    assert set(specs) == {*pods, "airlock-sentinel"}
    assert_locked_down(specs)
    budgets = by_kind(sentinel_applied, "PodDisruptionBudget")
    workloads = [r for r in sentinel_applied if r["kind"] in {"Deployment", "StatefulSet"}]
    assert {w["metadata"]["name"] for w in workloads} == set(budgets)
    assert all(
        r["metadata"]["namespace"] == "airlock"
        for r in sentinel_applied
        if r["kind"] != "Namespace"
    )
    # A drain takes one node of two (Sentinel fails over) and one Sentinel of three (two agree).
    assert budgets["airlock-redis"]["spec"]["maxUnavailable"] == 1
    assert budgets["airlock-sentinel"]["spec"]["maxUnavailable"] == 1


def test_the_components_wiring_agrees(sentinel_applied: list[dict[str, Any]]) -> None:
    """Every party names the same master and the Sentinels by the names and port they have:
    the workers' and bridge's URL, KEDA's triggers, the Sentinels' and the nodes' scripts."""
    statefulsets = by_kind(sentinel_applied, "StatefulSet")
    services = by_kind(sentinel_applied, "Service")
    sentinels = statefulsets["airlock-sentinel"]
    nodes = statefulsets["airlock-redis"]
    sentinel_service = sentinels["spec"]["serviceName"]
    assert services[sentinel_service]["spec"]["publishNotReadyAddresses"] is True
    count = sentinels["spec"]["replicas"]
    names = [f"airlock-sentinel-{n}.{sentinel_service}" for n in range(count)]
    sentinel = _container(sentinel_applied, "StatefulSet", "airlock-sentinel")
    master, port, quorum = _monitor(sentinel["command"][-1])
    assert (master, port) == (MASTER, REDIS_PORT) and count // 2 < quorum == QUORUM
    assert sentinel["ports"] == [{"name": "sentinel", "containerPort": SENTINEL_PORT}]
    for service in ("airlock-sentinel", sentinel_service):
        assert services[service]["spec"]["ports"][0]["port"] == SENTINEL_PORT
    env = _env(sentinel)
    assert env["REDIS_SENTINELS"].split() == [f"{name}.airlock.svc.cluster.local" for name in names]
    assert env["SENTINEL_NAME"] == f"$(POD_NAME).{sentinel_service}.airlock.svc.cluster.local"
    node = _container(sentinel_applied, "StatefulSet", "airlock-redis")
    node_env = _env(node)
    node_service = nodes["spec"]["serviceName"]
    assert nodes["spec"]["replicas"] == 2
    assert services[node_service]["spec"]["publishNotReadyAddresses"] is True
    assert node_env["REDIS_NODE"] == f"$(POD_NAME).{node_service}.airlock.svc.cluster.local"
    primary = f"airlock-redis-0.{node_service}.airlock.svc.cluster.local"
    assert node_env["REDIS_PRIMARY"] == env["REDIS_PRIMARY"] == primary
    assert node_env["REDIS_SENTINELS"] == "airlock-sentinel.airlock.svc.cluster.local"
    assert f"get-master-addr-by-name {MASTER} " in node["command"][-1]
    for name in (*WORKERS, "airlock-bridge"):
        url = _env(_container(sentinel_applied, "Deployment", name))["AIRLOCK_BROKER_URL"]
        address = redis_address(url)
        assert address is not None, name
        assert address.sentinels == tuple((host, SENTINEL_PORT) for host in names), name
        assert (address.master_name, address.username) == (MASTER, "$(AIRLOCK_REDIS_USER)")
    addresses = ",".join(f"{name}.airlock.svc:{SENTINEL_PORT}" for name in names)
    for scaled in by_kind(sentinel_applied, "ScaledObject").values():
        for trigger in scaled["spec"]["triggers"]:
            assert trigger["type"] == "redis-sentinel"
            metadata = trigger["metadata"]
            assert (metadata["addresses"], metadata["sentinelMaster"]) == (addresses, MASTER)
            assert metadata["usernameFromEnv"] == metadata["sentinelUsernameFromEnv"]
    auth = by_kind(sentinel_applied, "TriggerAuthentication")["airlock-redis"]["spec"]
    assert {ref["parameter"]: ref["key"] for ref in auth["secretTargetRef"]} == {
        "password": "password",
        "sentinelPassword": "password",
    }
    # No address reaches either node at random: a replica refuses writes.
    assert "airlock-redis" not in services
    for service in services.values():
        assert service["spec"]["selector"].get("app.kubernetes.io/component") != "redis" or (
            service["spec"].get("clusterIP") == "None"
        )


def _secrets(tmp_path: Path) -> None:
    """The Secrets as the Sentinel component's pods mount them."""
    (tmp_path / "secrets" / "ha").mkdir(parents=True)
    (tmp_path / "secrets" / "clients").mkdir()
    (tmp_path / "secrets" / "password").write_text(PASSWORDS["worker"])
    (tmp_path / "secrets" / "ha" / "replica-password").write_text(PASSWORDS["replica"])
    (tmp_path / "secrets" / "ha" / "sentinel-password").write_text(PASSWORDS["sentinel"])


@pytest.mark.parametrize(
    ("pod", "answer", "replica_of"),
    [
        ("airlock-redis-0", None, None),
        ("airlock-redis-1", None, "airlock-redis-0"),
        ("airlock-redis-0", "airlock-redis-1", "airlock-redis-1"),
    ],
)
def test_a_kubernetes_node_starts_as_the_sentinels_say(
    sentinel_applied: list[dict[str, Any]],
    tmp_path: Path,
    pod: str,
    answer: str | None,
    replica_of: str | None,
) -> None:
    container = _container(sentinel_applied, "StatefulSet", "airlock-redis")
    suffix = ".airlock-redis-headless.airlock.svc.cluster.local"
    env = {key: value.replace("$(POD_NAME)", pod) for key, value in _env(container).items()} | (
        {"STUB_PRIMARY": answer + suffix} if answer else {}
    )
    _secrets(tmp_path)
    _stub_sentinels(tmp_path)
    started = run_redis_start(container["command"][-1], tmp_path, env)
    _assert_node_users(started)
    extra = started.argv[3:]  # past the config file and --include <auth.conf>
    assert extra[:2] == ["--replica-announce-ip", pod + suffix]
    assert extra[2:] == (
        [] if replica_of is None else ["--replicaof", replica_of + suffix, str(REDIS_PORT)]
    )
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = by_kind(sentinel_applied, "StatefulSet")["airlock-redis"]["spec"]["template"]
    secret = {v["name"]: v for v in volumes["spec"]["volumes"]}[mounts["/run/secrets/redis-ha"]]
    assert secret["secret"]["secretName"] == "airlock-redis-ha"


def test_a_kubernetes_sentinel_writes_its_users_and_the_primary_it_watches(
    sentinel_applied: list[dict[str, Any]], tmp_path: Path
) -> None:
    container = _container(sentinel_applied, "StatefulSet", "airlock-sentinel")
    name = "airlock-sentinel-1.airlock-sentinel-headless.airlock.svc.cluster.local"
    env = {
        key: value.replace("$(POD_NAME)", "airlock-sentinel-1")
        for key, value in _env(container).items()
    }
    _secrets(tmp_path)
    _stub_sentinels(tmp_path)
    started = run_redis_start(container["command"][-1], tmp_path, env, written="sentinel.conf")
    _assert_sentinel_conf(started, env["REDIS_PRIMARY"], name)
    template = load_yaml(SENTINEL_COMPONENT / "redis-ha-secret.template.yaml")
    ((secret,),) = template.values()
    assert set(secret["stringData"]) == {"replica-password", "sentinel-password"}
    assert all("openssl rand" in value for value in secret["stringData"].values())


def _allows(
    policies: dict[str, dict[str, Any]],
    source: dict[str, str],
    target: dict[str, str],
    port: int,
) -> bool:
    """Whether the policies let pods labelled ``source`` open a TCP connection to pods labelled
    ``target`` on ``port``: some egress rule of a policy selecting the source and some ingress
    rule of a policy selecting the target admit it (a side no policy selects is open)."""

    def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
        return bool(selector.get("matchLabels", {}).items() <= labels.items())

    def side(direction: str, own: dict[str, str], peer: dict[str, str]) -> bool:
        kind = "Egress" if direction == "egress" else "Ingress"
        applying = [
            p["spec"]
            for p in policies.values()
            if selects(p["spec"]["podSelector"], own) and kind in p["spec"]["policyTypes"]
        ]
        peers = "to" if direction == "egress" else "from"
        return any(
            {"protocol": "TCP", "port": port} in rule["ports"]
            and any(
                "namespaceSelector" not in entry and selects(entry["podSelector"], peer)
                for entry in rule[peers]
            )
            for spec in applying
            for rule in spec.get(direction, [])
        )

    return side("egress", source, target) and side("ingress", target, source)


def test_network_policies_let_each_party_reach_what_a_failover_needs(
    sentinel_applied: list[dict[str, Any]],
) -> None:
    policies = by_kind(sentinel_applied, "NetworkPolicy")
    labels = {
        r["metadata"]["name"]: r["spec"]["template"]["metadata"]["labels"]
        for r in sentinel_applied
        if r["kind"] in {"Deployment", "StatefulSet"}
    }
    sentinel, redis = labels["airlock-sentinel"], labels["airlock-redis"]
    for client in (*WORKERS, "airlock-bridge"):
        assert _allows(policies, labels[client], sentinel, SENTINEL_PORT), client
        assert _allows(policies, labels[client], redis, REDIS_PORT), client
        assert not _allows(
            policies, labels[client], labels["airlock-client-redis"], REDIS_PORT
        ) or (client == "airlock-bridge")
    assert _allows(policies, sentinel, redis, REDIS_PORT)
    assert _allows(policies, sentinel, sentinel, SENTINEL_PORT)
    assert _allows(policies, redis, redis, REDIS_PORT)  # replication
    assert _allows(policies, redis, sentinel, SENTINEL_PORT)  # a starting node asks
    assert not _allows(policies, sentinel, labels["airlock-client-redis"], REDIS_PORT)
    assert not _allows(policies, labels["airlock-light-worker"], labels["airlock-bridge"], 9809)
