"""deploy/kubernetes: every manifest validated (built-in kinds by kubernetes-validate, KEDA's
custom resources by a schema written from KEDA's documentation), scanned by checkov, and held
to the pod security, probes, sizing and network rules of docs/operations.md."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.queue.jobs import QUEUES
from tests.deploy.conftest import (
    CLIENTS,
    HOSTILE_CLIENT_NAMES,
    KUBERNETES,
    KUSTOMIZATION,
    LONG_CLIENT_NAME,
    MANIFESTS,
    REDIS_USERS,
    SCHEMAS,
    assert_users_with_passwords,
    by_kind,
    checkov,
    pod_specs,
    refused_redis_start,
    run_redis_start,
    run_tool,
)
from tests.redis_server import DEPLOYED_REDIS_PORT

KEDA_SCHEMA = SCHEMAS / "keda-v1alpha1.json"
#: Kinds kubernetes-validate has no schema for, and what validates them instead.
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "deploy/schemas/keda-v1alpha1.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "deploy/schemas/keda-v1alpha1.json",
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): "test_kustomization_* below",
    ("kustomize.config.k8s.io/v1alpha1", "Component"): "test_sentinel.py, rendered",
}
#: The oldest Kubernetes these manifests must apply to (policy/v1, autoscaling/v2, PSA labels)
#: and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")
#: Each worker Deployment and the queues it consumes: OCR workers read the pages of a scan too.
WORKERS = {
    "airlock-light-worker": ("airlock.light",),
    "airlock-ocr-worker": ("airlock.ocr", "airlock.pages"),
}
#: The workers' Redis and the clients' (docs/operations.md#redis-users).
REDIS_SERVERS = ("airlock-redis", "airlock-client-redis")
SIZING_COMMENT = "# measured: see docs/sizing.md"

Validate = Callable[[Path, list[Any]], list[list[str]]]


def _config(applied: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = by_kind(applied, "ConfigMap")["airlock-config"]["data"]
    return data


# --- validation -----------------------------------------------------------------------------


def test_kubernetes_validate_strict_on_every_manifest() -> None:
    """Strict: an unknown field (a typo) is an error, not something the API server drops."""
    args = []
    for version in KUBERNETES_VERSIONS:
        args += ["--kubernetes-version", version]
    result = run_tool("kubernetes-validate", "--strict", *args, *(str(p) for p in MANIFESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ERROR" not in result.stdout and "FATAL" not in result.stdout
    # Every "no schema" warning is for a kind validated another way below.
    for line in result.stdout.splitlines():
        if line.startswith("WARN"):
            match = re.search(r"kind (\w+) with api version (\S+) ", line)
            assert match, line
            assert (match[2], match[1]) in CUSTOM_KINDS, line


def test_keda_resources_match_the_keda_schema(
    yaml_docs: dict[Path, list[Any]], validate: Validate
) -> None:
    keda = [
        doc
        for path in MANIFESTS
        for doc in yaml_docs[path]
        if doc["apiVersion"].startswith("keda.sh/")
    ]
    assert {doc["kind"] for doc in keda} == {"ScaledObject", "TriggerAuthentication"}
    errors = validate(KEDA_SCHEMA, keda)
    assert errors == [[] for _ in keda]


@pytest.mark.parametrize(
    "mutation",
    [
        lambda so: so["spec"].update(minReplicas=1),
        lambda so: so["spec"]["triggers"][0]["metadata"].update(listLength=4),
        lambda so: so["spec"]["triggers"][0]["metadata"].pop("listName"),
        lambda so: so["spec"]["triggers"][0]["metadata"].update(listNmae="airlock.ocr"),
        lambda so: so["spec"]["scaleTargetRef"].pop("name"),
        lambda so: so["spec"]["triggers"][0]["metadata"].pop("address"),
    ],
)
def test_the_keda_schema_rejects_a_broken_scaled_object(
    yaml_docs: dict[Path, list[Any]], validate: Validate, mutation: Callable[[Any], None]
) -> None:
    scaled = next(
        doc for doc in yaml_docs[KUBERNETES / "keda.yaml"] if doc["kind"] == "ScaledObject"
    )
    broken = copy.deepcopy(scaled)
    mutation(broken)
    (errors,) = validate(KEDA_SCHEMA, [broken])
    assert errors, "the KEDA schema accepted a broken ScaledObject"


def test_kustomization_lists_every_manifest_to_apply(yaml_docs: dict[Path, list[Any]]) -> None:
    (kustomization,) = yaml_docs[KUSTOMIZATION]
    listed = set(kustomization["resources"])
    present = {path.name for path in KUBERNETES.glob("*.yaml")}
    not_applied = {"kustomization.yaml", "redis-secret.template.yaml"}
    assert listed == present - not_applied
    assert kustomization["namespace"] == "airlock"
    assert [image["name"] for image in kustomization["images"]] == ["airlock"]
    # The Secret template is never applied: a committed placeholder would become a known password.
    assert "redis-secret.template.yaml" not in listed
    # Alternatives are applied instead of a listed file, by hand, never beside it.
    assert not any(name.startswith("alternatives") for name in listed)


def test_kustomization_builds_with_kubectl() -> None:
    """`kubectl kustomize` is what `kubectl apply -k` runs; kubectl is not a Debian package
    this project installs, so this runs where a kubectl is on PATH (the other tests check the
    same list without it)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed; kustomization contents are checked by the test above")
    result = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    kinds = re.findall(r"^kind: (\w+)$", result.stdout, re.MULTILINE)
    assert kinds.count("Deployment") == 4
    assert kinds.count("ScaledObject") == 2
    assert "Secret" not in kinds
    assert "image: airlock:0.1.0" in result.stdout


@pytest.mark.slow
def test_checkov_finds_nothing_unjustified() -> None:
    result, report, failed = checkov("kubernetes", "--directory", str(KUBERNETES))
    assert failed == []
    assert report["summary"]["passed"] > 200, "checkov ran no Kubernetes checks"
    # Every skip names its check and gives a reason (a checkov.io/skipN annotation).
    for check in report["results"]["skipped_checks"]:
        assert check["check_id"] in {"CKV_K8S_43", "CKV_K8S_35"}, check["check_id"]
        assert len(check["check_result"].get("suppress_comment") or "") > 20, check
    assert result.returncode == 0, result.stderr


# --- pod security ---------------------------------------------------------------------------


def test_namespace_enforces_the_restricted_pod_security_standard(
    applied: list[dict[str, Any]],
) -> None:
    labels = by_kind(applied, "Namespace")["airlock"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for resource in applied:
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "airlock"


def test_every_pod_is_locked_down(applied: list[dict[str, Any]]) -> None:
    specs = dict(pod_specs(applied))
    assert set(specs) == {*WORKERS, "airlock-bridge", "airlock-door", *REDIS_SERVERS}
    assert_locked_down(specs)


def assert_locked_down(specs: dict[str, dict[str, Any]]) -> None:
    """No token, no root, no privilege, no host namespace, the runtime's syscall filter, a
    read-only root with /tmp writable, requests, limits and both probes: every pod."""
    for name, spec in specs.items():
        assert spec["automountServiceAccountToken"] is False, name
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod["runAsUser"] >= 10000, name
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(flag), (name, flag)
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
            assert context.get("privileged") is False, name
            assert context["runAsNonRoot"] is True, name
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
            resources = container["resources"]
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources[bound]), (name, bound)
            assert "livenessProbe" in container and "readinessProbe" in container, name
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert "/tmp" in mounts, name


def test_airlock_pods_run_as_the_image_user(applied: list[dict[str, Any]]) -> None:
    for name, spec in pod_specs(applied):
        if name in REDIS_SERVERS:
            continue
        assert spec["securityContext"]["runAsUser"] == 10001
        assert spec["securityContext"]["runAsGroup"] == 10001
        assert spec["serviceAccountName"] == "airlock"
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        (container,) = spec["containers"]
        scratch = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
        assert "emptyDir" in volumes[scratch["name"]]
        assert volumes[scratch["name"]]["emptyDir"]["sizeLimit"]


def test_service_accounts_carry_no_token(applied: list[dict[str, Any]]) -> None:
    for account in by_kind(applied, "ServiceAccount").values():
        assert account["automountServiceAccountToken"] is False
    assert not by_kind(applied, "RoleBinding") and not by_kind(applied, "ClusterRoleBinding")


def test_every_resources_block_points_at_the_sizing_section() -> None:
    """Container resources (indented under a pod template; a claim's storage request is not
    one) carry the pointer to the measured figures."""
    blocks = 0
    for path in MANIFESTS:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.strip() == "resources:" and len(line) - len(line.lstrip()) >= 10:
                blocks += 1
                above = "\n".join(lines[max(0, number - 3) : number])
                assert SIZING_COMMENT in above, f"{path.name}:{number + 1}"
    # light worker, OCR worker, bridge, door, the workers' and the clients' Redis, the Sentinels
    assert blocks == 7


def test_no_todo_left_in_deployment_files() -> None:
    for path in [
        *MANIFESTS,
        KUBERNETES.parent / "compose.yaml",
        KUBERNETES.parents[1] / "Dockerfile",
    ]:
        text = path.read_text()
        assert not re.search(r"\b(TODO|FIXME|XXX)\b", text), path


# --- workers: queues, probes, shutdown, scaling -----------------------------------------------


def test_worker_deployments_consume_the_queues_the_code_routes_to(
    applied: list[dict[str, Any]],
) -> None:
    deployments = by_kind(applied, "Deployment")
    assert {queue for queues in WORKERS.values() for queue in queues} == set(QUEUES)
    for name, queues in WORKERS.items():
        (container,) = deployments[name]["spec"]["template"]["spec"]["containers"]
        assert container["args"] == ["worker", "-Q", ",".join(queues)]
        # KEDA owns the replica count; a fixed one would be reset by every `kubectl apply`.
        assert "replicas" not in deployments[name]["spec"]


def test_workers_finish_their_task_before_being_killed(applied: list[dict[str, Any]]) -> None:
    config = _config(applied)
    hard_limit = float(config["AIRLOCK_TASK_TIME_LIMIT"])
    assert float(config["AIRLOCK_VISIBILITY_TIMEOUT"]) > hard_limit
    assert (
        float(config["AIRLOCK_SANDBOX_WALL_SECONDS"])
        < float(config["AIRLOCK_TASK_SOFT_TIME_LIMIT"])
        < hard_limit
    )
    for name, spec in pod_specs(applied):
        if name in WORKERS:
            assert spec["terminationGracePeriodSeconds"] > hard_limit, name


def test_worker_probes_are_a_ping_through_the_broker_and_a_local_heartbeat(
    applied: list[dict[str, Any]],
) -> None:
    for name, spec in pod_specs(applied):
        if name not in WORKERS:
            continue
        (container,) = spec["containers"]
        ready, live = container["readinessProbe"], container["livenessProbe"]
        command = ready["exec"]["command"]
        assert command[:5] == ["airlock", "health", "--ready", "--worker", "--timeout"]
        # The probe's own timeout covers the ping's timeout plus the CLI's start-up.
        assert ready["timeoutSeconds"] > float(command[5])
        # Liveness reads the heartbeat file only, no broker round trip; but the main loop does
        # not beat while it reconnects to Redis, so its window is far longer than readiness's.
        assert live["exec"]["command"] == ["airlock", "health", "--live"]
        assert (
            live["periodSeconds"] * live["failureThreshold"]
            > 2 * ready["periodSeconds"] * ready["failureThreshold"]
        )


def test_memory_limit_leaves_room_for_every_sandboxed_child(applied: list[dict[str, Any]]) -> None:
    """A child at its own address-space ceiling must meet its rlimit (precise reason) before
    the container's cgroup limit (OOM kill of the whole worker)."""
    sandbox_mib = 1024  # SandboxLimits().memory_bytes, AIRLOCK_SANDBOX_MEMORY_MB's default
    for name, spec in pod_specs(applied):
        if name not in WORKERS:
            continue
        (container,) = spec["containers"]
        env = {item["name"]: item.get("value") for item in container["env"]}
        concurrency = int(env["AIRLOCK_CONCURRENCY"])
        limit = container["resources"]["limits"]["memory"]
        assert limit.endswith("Mi")
        assert int(limit[:-2]) >= concurrency * sandbox_mib + 256, name


def test_scaled_objects_scale_each_worker_on_its_queue(applied: list[dict[str, Any]]) -> None:
    deployments = by_kind(applied, "Deployment")
    scaled = by_kind(applied, "ScaledObject")
    auth = by_kind(applied, "TriggerAuthentication")
    redis_service = by_kind(applied, "Service")["airlock-redis"]
    assert set(scaled) == set(WORKERS)
    for name, queues in WORKERS.items():
        spec = scaled[name]["spec"]
        assert spec["scaleTargetRef"]["name"] in deployments
        assert spec["scaleTargetRef"]["name"] == name
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
        # One trigger per queue the worker consumes: a backlog of pages alone scales it too.
        assert [trigger["metadata"]["listName"] for trigger in spec["triggers"]] == list(queues)
        for trigger in spec["triggers"]:
            assert trigger["type"] == "redis"
            host, port = trigger["metadata"]["address"].split(":")
            assert host == f"{redis_service['metadata']['name']}.airlock.svc"
            assert int(port) == redis_service["spec"]["ports"][0]["port"]
            assert trigger["authenticationRef"]["name"] in auth


def test_hpa_alternative_targets_the_same_deployments(yaml_docs: dict[Path, list[Any]]) -> None:
    hpas = {
        doc["metadata"]["name"]: doc for doc in yaml_docs[KUBERNETES / "alternatives" / "hpa.yaml"]
    }
    assert set(hpas) == set(WORKERS)
    for name, queues in WORKERS.items():
        spec = hpas[name]["spec"]
        assert spec["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": name,
        }
        metrics = spec["metrics"]
        assert [m["external"]["metric"]["selector"]["matchLabels"] for m in metrics] == [
            {"queue": queue} for queue in queues
        ]
        assert {m["external"]["metric"]["name"] for m in metrics} == {"airlock_queue_depth"}


def test_every_deployment_has_a_disruption_budget(applied: list[dict[str, Any]]) -> None:
    budgets = by_kind(applied, "PodDisruptionBudget")
    workloads = [r for r in applied if r["kind"] in {"Deployment", "StatefulSet"}]
    assert len(budgets) == len(workloads)
    for workload in workloads:
        name = workload["metadata"]["name"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert budgets[name]["spec"]["selector"]["matchLabels"].items() <= labels.items(), name


# --- Redis --------------------------------------------------------------------------------


def test_redis_is_durable_and_password_protected(applied: list[dict[str, Any]]) -> None:
    statefulset = by_kind(applied, "StatefulSet")["airlock-redis"]
    conf = by_kind(applied, "ConfigMap")["airlock-redis-config"]["data"]["redis.conf"]
    assert re.search(r"^appendonly yes$", conf, re.MULTILINE)
    assert re.search(r"^maxmemory-policy noeviction$", conf, re.MULTILINE)
    assert not re.search(r"^\s*requirepass", conf, re.MULTILINE)
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert {"mountPath": "/data", "name": claim["metadata"]["name"]} in container["volumeMounts"]
    script = container["command"][-1]
    assert "/run/secrets/redis/password" in script and "requirepass" not in script
    assert "env" not in container, "the Redis password is mounted as a file, not in the environment"
    volumes = {
        volume["name"]: volume for volume in statefulset["spec"]["template"]["spec"]["volumes"]
    }
    assert volumes["password"]["secret"]["secretName"] == "airlock-redis"
    # The default user is off: the probes name their user.
    for probe in ("readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"][-1]
        assert (
            'REDISCLI_AUTH="$(cat /run/secrets/redis/password)" redis-cli --user worker' in command
        )


def start_script(applied: list[dict[str, Any]], name: str) -> str:
    statefulset = by_kind(applied, "StatefulSet")[name]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    script: str = container["command"][-1]
    return script


def secrets_dir(tmp_path: Path, clients: dict[str, str]) -> None:
    """The Secrets as the clients' Redis mounts them: the worker password, and one file per
    client tenant (Secret airlock-redis-clients)."""
    (tmp_path / "secrets" / "clients").mkdir(parents=True)
    (tmp_path / "secrets" / "password").write_text("w0rker")
    for name, password in clients.items():
        (tmp_path / "secrets" / "clients" / name).write_text(password)


def test_redis_users_are_the_shipped_ones_with_their_passwords_in_memory_only(
    applied: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The ConfigMap holds deploy/redis/users.conf as it is (compose mounts that file), and the
    start script puts each password from the Secrets on its own user's line, in a file only
    Redis's uid reads; every airlock pod logs in as `worker`, and so does KEDA. The workers'
    Redis mounts no client password, so it has no client user."""
    conf = by_kind(applied, "ConfigMap")["airlock-redis-config"]["data"]
    assert conf["users.conf"] == REDIS_USERS.read_text()
    for name in REDIS_SERVERS:
        assert start_script(applied, name) == start_script(applied, "airlock-redis")
    secrets_dir(tmp_path, CLIENTS)
    started = run_redis_start(start_script(applied, "airlock-client-redis"), tmp_path, {})
    assert_users_with_passwords(started, "w0rker", CLIENTS)
    # CONFIG is renamed away here; a node of the Sentinel component keeps it (test_sentinel).
    assert started.argv == [
        "/etc/redis/airlock/redis.conf",
        "--include",
        str(tmp_path / "auth.conf"),
        "--rename-command",
        "CONFIG",
        "",
    ]
    statefulsets = by_kind(applied, "StatefulSet")
    mounts = {}
    for name in REDIS_SERVERS:
        volumes = statefulsets[name]["spec"]["template"]["spec"]["volumes"]
        mounts[name] = {v["secret"]["secretName"]: v["secret"] for v in volumes if "secret" in v}
    assert mounts["airlock-redis"]["airlock-redis"]["items"] == [
        {"key": "password", "path": "password"}
    ]
    assert set(mounts["airlock-redis"]) == {"airlock-redis"}
    assert mounts["airlock-client-redis"]["airlock-redis"]["items"] == [
        {"key": "password", "path": "password"}
    ]
    assert mounts["airlock-client-redis"]["airlock-redis-clients"]["optional"] is True
    for name, spec in pod_specs(applied):
        if name in REDIS_SERVERS:
            continue
        (pod,) = spec["containers"]
        env = {item["name"]: item.get("value") for item in pod["env"]}
        assert env["AIRLOCK_REDIS_USER"] == "worker"
        assert env["AIRLOCK_BROKER_URL"].startswith(
            "redis://$(AIRLOCK_REDIS_USER):$(AIRLOCK_REDIS_PASSWORD)@airlock-redis:"
        )
        clients_url = env.get("AIRLOCK_CLIENT_REDIS_URL")
        if name == "airlock-bridge":
            assert clients_url == (
                "redis://$(AIRLOCK_REDIS_USER):$(AIRLOCK_REDIS_PASSWORD)"
                f"@airlock-client-redis:{DEPLOYED_REDIS_PORT}/0"
            )
        else:
            assert clients_url is None, name
    for scaled in by_kind(applied, "ScaledObject").values():
        for trigger in scaled["spec"]["triggers"]:
            assert trigger["metadata"]["usernameFromEnv"] == "AIRLOCK_REDIS_USER"


@pytest.mark.parametrize("name", [*(n for n in HOSTILE_CLIENT_NAMES if n), LONG_CLIENT_NAME])
def test_the_start_script_refuses_a_client_secret_that_would_widen_an_acl(
    applied: list[dict[str, Any]], tmp_path: Path, name: str
) -> None:
    """A key of the Secret airlock-redis-clients names a tenant; a name or a password that
    would reach other tenants' keys stops Redis from starting."""
    secrets_dir(tmp_path, {name: "s3cret"})
    script = start_script(applied, "airlock-client-redis")
    assert "airlock: " in refused_redis_start(script, tmp_path, {})


def test_the_start_script_refuses_a_client_password_that_adds_a_rule(
    applied: list[dict[str, Any]], tmp_path: Path
) -> None:
    secrets_dir(tmp_path, {"acme": "s3cret ~* +@all"})
    script = start_script(applied, "airlock-client-redis")
    assert "airlock: " in refused_redis_start(script, tmp_path, {})


def test_secret_template_holds_no_real_password(yaml_docs: dict[Path, list[Any]]) -> None:
    workers, clients, door = yaml_docs[KUBERNETES / "redis-secret.template.yaml"]
    assert workers["kind"] == "Secret" and workers["metadata"]["name"] == "airlock-redis"
    assert clients["kind"] == "Secret" and clients["metadata"]["name"] == "airlock-redis-clients"
    for secret in (workers, clients):
        assert "data" not in secret
        assert all("openssl rand" in value for value in secret["stringData"].values())
    assert set(workers["stringData"]) == {"password", "result-cache-key"}
    # The door's keys: a placeholder for a key's hash, never a key.
    assert door["kind"] == "Secret" and door["metadata"]["name"] == "airlock-http-keys"
    assert "data" not in door and door["stringData"] == {
        "keys": "acme replace-with-the-sha256-hex-of-acme-s-key"
    }


# --- network policy -------------------------------------------------------------------------


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return bool(selector.get("matchLabels", {}).items() <= labels.items())


def test_network_policies_let_workers_reach_only_redis_and_dns(
    applied: list[dict[str, Any]],
) -> None:
    policies = by_kind(applied, "NetworkPolicy")
    default = policies["default-deny"]["spec"]
    assert default["podSelector"] == {} and set(default["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in default and "egress" not in default
    workloads = {
        r["metadata"]["name"]: r["spec"]["template"]["metadata"]["labels"]
        for r in applied
        if r["kind"] in {"Deployment", "StatefulSet"}
    }
    redis_labels = workloads["airlock-redis"]
    client_redis_labels = workloads["airlock-client-redis"]
    for name in (*WORKERS, "airlock-bridge"):
        labels = workloads[name]
        egress_rules = [
            rule
            for policy in policies.values()
            if "Egress" in policy["spec"]["policyTypes"]
            and _selects(policy["spec"]["podSelector"], labels)
            for rule in policy["spec"].get("egress", [])
        ]
        assert egress_rules, name
        reached = set()
        for rule in egress_rules:
            ports = {(port["protocol"], port["port"]) for port in rule["ports"]}
            peers = rule["to"]
            assert len(peers) == 1
            (peer,) = peers
            if ports == {("TCP", DEPLOYED_REDIS_PORT)}:
                assert "namespaceSelector" not in peer
                servers = {
                    "airlock-redis": redis_labels,
                    "airlock-client-redis": client_redis_labels,
                }
                (server,) = [
                    server
                    for server, selected in servers.items()
                    if _selects(peer["podSelector"], selected)
                ]
                reached.add(server)
            else:
                assert ports == {("UDP", 53), ("TCP", 53)}
                assert peer["namespaceSelector"]["matchLabels"] == {
                    "kubernetes.io/metadata.name": "kube-system"
                }
                assert peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
        # The bridge alone reaches the clients' Redis: no worker can be reached from there.
        wanted = (
            {"airlock-redis", "airlock-client-redis"}
            if name == "airlock-bridge"
            else {"airlock-redis"}
        )
        assert reached == wanted, name


def _ingress_peers(applied: list[dict[str, Any]], policy_name: str) -> list[dict[str, Any]]:
    policy = by_kind(applied, "NetworkPolicy")[policy_name]["spec"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": DEPLOYED_REDIS_PORT}]
    for peer in rule["from"]:
        assert "ipBlock" not in peer
        assert peer["podSelector"]["matchLabels"], "every peer names the pods it admits"
    assert policy["egress"] == []
    peers: list[dict[str, Any]] = rule["from"]
    return peers


def test_the_workers_redis_accepts_only_airlock_and_keda(applied: list[dict[str, Any]]) -> None:
    """No application pod reaches the workers' Redis: a client cannot take its connections."""
    peers = _ingress_peers(applied, "airlock-redis-ingress")
    namespaces = [peer.get("namespaceSelector", {}).get("matchLabels") for peer in peers]
    assert namespaces == [None, {"kubernetes.io/metadata.name": "keda"}]


def test_the_clients_redis_accepts_the_bridge_and_labelled_clients(
    applied: list[dict[str, Any]],
) -> None:
    peers = _ingress_peers(applied, "airlock-client-redis-ingress")
    assert [peer["podSelector"]["matchLabels"] for peer in peers] == [
        {"app.kubernetes.io/name": "airlock", "app.kubernetes.io/component": "bridge"},
        {"airlock.io/redis-client": "true"},
    ]
    assert peers[1]["namespaceSelector"]["matchLabels"] == {"airlock.io/client": "true"}
