"""Podman pods run the way deploy/kubernetes runs its pods, for the image tests and the
start-up bench.

A container's user, read-only root, dropped capabilities, no_new_privs, memory and CPU limits,
environment (its ConfigMap, its Secret, ``$(VAR)`` references expanded as the kubelet expands
them), volumes and probe commands are all read from the manifest, so the containers run what
the manifests say, not a copy of it. What a cluster adds and podman does not is done here:
the Service names ``airlock-redis`` and ``airlock-client-redis`` are ``/etc/hosts`` entries of
the pod, and probes are run when the test asks (podman runs health checks from systemd timers,
which these hosts lack). Both Redis servers share the pod's loopback, so the clients' listens
on :data:`CLIENT_REDIS_PORT` rather than the deployed port (redis-py's default), and the
bridge is pointed at that port (the clients' Redis's own probes, which name no port, reach the
workers' Redis here).

A pod has no network but its loopback (``--network none``): its containers reach each other
on 127.0.0.1 and nothing else, and the test reaches each Redis through a Unix socket in a
directory it shares with the Redis containers.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from redis import Redis

from tests.deploy.conftest import KUBERNETES, by_kind, load_yaml
from tests.redis_server import DEPLOYED_REDIS_PORT

REPO = Path(__file__).resolve().parents[2]
PODMAN = REPO / "scripts" / "podman"
SOCKET = "redis.sock"
CLIENT_SOCKET = "client-redis.sock"
#: The clients' Redis's port in a pod, beside the workers' on the deployed port (the pod's own
#: network, never the host's).
CLIENT_REDIS_PORT = 6380
#: The client tenant the image tests send as (Redis user client-smoke).
TENANT = "smoke"
_PROBE_SECONDS = 90.0


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``scripts/podman ARGS``: podman with airlock's own storage and configuration."""
    result = subprocess.run(
        [str(PODMAN), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args[:3])} … exited {result.returncode}:\n{result.stderr[-4000:]}"
        )
    return result


def manifests() -> list[dict[str, Any]]:
    """Every resource of the Deployments, the StatefulSet and their ConfigMap."""
    names = (
        "config.yaml",
        "redis.yaml",
        "client-redis.yaml",
        "light-worker.yaml",
        "ocr-worker.yaml",
        "bridge.yaml",
    )
    loaded = load_yaml(*(KUBERNETES / name for name in names))
    return [doc for docs in loaded.values() for doc in docs]


@dataclass(frozen=True)
class Workload:
    """The one container of a Deployment or StatefulSet, as podman needs it."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    flags: tuple[str, ...]
    readiness: tuple[str, ...]
    liveness: tuple[str, ...]


def _quantity(value: str) -> str:
    """A Kubernetes memory quantity as podman writes it ("2560Mi" -> "2560m")."""
    match = re.fullmatch(r"(\d+)(Mi|Gi)", value)
    assert match, f"unsupported quantity {value!r}"
    return match[1] + {"Mi": "m", "Gi": "g"}[match[2]]


def _cpus(value: str) -> str:
    """A Kubernetes CPU quantity as podman writes it ("500m" -> "0.5")."""
    return str(int(value[:-1]) / 1000) if value.endswith("m") else value


def workload(
    resources: Sequence[dict[str, Any]],
    name: str,
    secret_data: Mapping[str, Mapping[str, str]],
    files: Path,
) -> Workload:
    """``name``'s container as its manifest runs it; ConfigMap, Secret and data volumes are
    materialised under ``files`` (a Secret's files owned by root and the pod's fsGroup, with
    the manifest's mode, as the kubelet lays them out)."""
    configmaps = {n: r["data"] for n, r in by_kind(list(resources), "ConfigMap").items()}
    owners = {**by_kind(list(resources), "Deployment"), **by_kind(list(resources), "StatefulSet")}
    pod_spec = owners[name]["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]

    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(configmaps[source["configMapRef"]["name"]])
    for item in container.get("env", []):
        if "value" in item:
            # The kubelet expands $(VAR) from the variables defined before this one.
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secret_data[ref["name"]][ref["key"]]

    context = {**pod_spec["securityContext"], **container["securityContext"]}
    flags = ["--user", f"{context['runAsUser']}:{context['runAsGroup']}"]
    if context.get("readOnlyRootFilesystem"):
        flags.append("--read-only")
    flags += [arg for cap in context["capabilities"]["drop"] for arg in ("--cap-drop", cap)]
    if context.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    limits = container["resources"]["limits"]
    flags += ["--memory", _quantity(limits["memory"]), "--cpus", _cpus(str(limits["cpu"]))]

    volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    group = pod_spec["securityContext"].get("fsGroup", context["runAsGroup"])
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        target = mount["mountPath"]
        if "emptyDir" in volume:
            size = volume["emptyDir"].get("sizeLimit")
            options = "rw,mode=1777" + (f",size={_quantity(size)}" if size else "")
            flags += ["--tmpfs", f"{target}:{options}"]
            continue
        source = files / name / mount["name"]
        source.mkdir(parents=True)
        # Explicit modes: the test's umask may be private, the containers' users are not root.
        for directory in (source.parent, source):
            directory.chmod(0o755)
        if "configMap" in volume:
            for key, text in configmaps[volume["configMap"]["name"]].items():
                (source / key).write_text(text)
                (source / key).chmod(0o644)
        elif "secret" in volume:
            data = secret_data.get(volume["secret"]["secretName"], {})
            assert data or volume["secret"].get("optional"), volume["secret"]["secretName"]
            items = volume["secret"].get("items")
            paths = {item["key"]: item["path"] for item in items} if items else {k: k for k in data}
            for key, path in paths.items():
                (source / path).write_text(data[key])
                (source / path).chmod(volume["secret"].get("defaultMode", 0o644))
                os.chown(source / path, 0, group)
        else:  # the StatefulSet's volume claim: an empty directory the pod's user owns
            os.chown(source, context["runAsUser"], group)
        flags += ["-v", f"{source}:{target}" + (":ro" if mount.get("readOnly") else "")]

    def probe(kind: str) -> tuple[str, ...]:
        return tuple(container.get(kind, {}).get("exec", {}).get("command", ()))

    return Workload(
        name=name,
        image=container["image"],
        command=tuple(container.get("command", ())),
        args=tuple(container.get("args", ())),
        env=env,
        flags=tuple(flags),
        readiness=probe("readinessProbe"),
        liveness=probe("livenessProbe"),
    )


class Pod:
    """A podman pod with loopback only, and ``airlock-redis`` naming 127.0.0.1 in it."""

    def __init__(self) -> None:
        self.name = f"airlock-test-{secrets.token_hex(4)}"
        # Not pytest's tmp_path: its parents are private to root, and the containers' users
        # must reach the files mounted from here.
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self.workdir.chmod(0o755)
        self.password = secrets.token_hex(16)  # Redis user `worker`
        self.client_password = secrets.token_hex(16)  # Redis user `client-smoke`
        self.cache_key = secrets.token_hex(32)  # the workers' result-cache MAC secret
        self.socket_dir = self.workdir / "socket"
        self.socket_dir.mkdir()
        self.socket_dir.chmod(0o1777)
        self.resources = manifests()
        # The Service's name, as cluster DNS would answer it. A file, not --add-host: podman
        # writes no /etc/hosts for a pod without a network.
        self.hosts = self.workdir / "hosts"
        self.hosts.write_text("127.0.0.1 localhost airlock-redis airlock-client-redis\n")
        self.hosts.chmod(0o644)
        podman("pod", "create", "--name", self.name, "--network", "none")

    def workload(self, name: str) -> Workload:
        spec = workload(
            self.resources,
            name,
            {
                "airlock-redis": {
                    "password": self.password,
                    "result-cache-key": self.cache_key,
                },
                "airlock-redis-clients": {TENANT: self.client_password},
            },
            self.workdir,
        )
        if name != "airlock-bridge":
            return spec
        # The manifest names the deployed Redis's port; in the pod the client Redis has its own.
        deployed = f":{DEPLOYED_REDIS_PORT}/"
        url = spec.env["AIRLOCK_CLIENT_REDIS_URL"].replace(deployed, f":{CLIENT_REDIS_PORT}/")
        return replace(spec, env={**spec.env, "AIRLOCK_CLIENT_REDIS_URL": url})

    def start(
        self, spec: Workload, container: str, *, args: Sequence[str] | None = None,
        extra: Sequence[str] = (),
    ) -> str:  # fmt: skip
        """Run ``spec``'s container (with other ``args`` if given) in the pod; its name."""
        name = f"{self.name}-{container}"
        env = [arg for key, value in spec.env.items() for arg in ("-e", f"{key}={value}")]
        entrypoint = ["--entrypoint", spec.command[0]] if spec.command else []
        command = [*spec.command[1:], *(spec.args if args is None else args)]
        podman("run", "-d", "--name", name, "--pod", self.name, "--no-healthcheck",
               "-v", f"{self.hosts}:/etc/hosts:ro",
               *spec.flags, *env, *entrypoint, *extra, spec.image, *command)  # fmt: skip
        return name

    def start_redis(self) -> tuple[str, str]:
        """Both Redis servers as their StatefulSets run them, each with a Unix socket the test
        connects through; the clients' on its own port (they share one ConfigMap)."""
        (config,) = [r for r in self.resources if r["metadata"]["name"] == "airlock-redis-config"]
        shipped = config["data"]["redis.conf"]
        names = []
        for server, container, socket, extra in (
            ("airlock-redis", "redis", SOCKET, ""),
            ("airlock-client-redis", "client-redis", CLIENT_SOCKET, f"port {CLIENT_REDIS_PORT}\n"),
        ):
            config["data"]["redis.conf"] = (
                f"{shipped}{extra}unixsocket /socket/{socket}\nunixsocketperm 777\n"
            )
            name = self.start(self.workload(server), container,
                              extra=["-v", f"{self.socket_dir}:/socket"])  # fmt: skip
            self._wait_for_socket(name, self.socket_dir / socket)
            names.append(name)
        config["data"]["redis.conf"] = shipped
        return names[0], names[1]

    def _wait_for_socket(self, name: str, path: Path) -> None:
        wait_until(lambda: path.exists() or not self.running(name), lambda: "no socket")
        assert path.exists(), f"{name} exited:\n{self.logs(name)[-3000:]}"

    def redis(self) -> Redis:
        """The workers' Redis as the workers connect: Redis user `worker`."""
        return Redis(
            unix_socket_path=str(self.socket_dir / SOCKET),
            username="worker",
            password=self.password,
        )

    def clients_redis(self) -> Redis:
        """The clients' Redis as the bridge connects: Redis user `worker`."""
        return Redis(
            unix_socket_path=str(self.socket_dir / CLIENT_SOCKET),
            username="worker",
            password=self.password,
        )

    def client(self) -> Redis:
        """The clients' Redis as an application sending requests to the bridge connects: its
        tenant's Redis user, client-smoke."""
        return Redis(
            unix_socket_path=str(self.socket_dir / CLIENT_SOCKET),
            username=f"client-{TENANT}",
            password=self.client_password,
        )

    def probe(self, container: str, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return podman("exec", container, *command, check=False, timeout=60)

    def wait_ready(self, container: str, spec: Workload) -> None:
        """Run the readiness probe until it passes, as the kubelet would before routing."""
        wait_until(
            lambda: self.probe(container, spec.readiness).returncode == 0,
            lambda: f"{container} never ready:\n{self.logs(container)[-3000:]}",
        )

    def running(self, container: str) -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}", container, check=False)
        return state.stdout.strip() == "true"

    def logs(self, container: str) -> str:
        result = podman("logs", container, check=False)
        return result.stdout + result.stderr

    def remove(self) -> None:
        podman("pod", "rm", "--force", "--time", "0", self.name, check=False)
        shutil.rmtree(self.workdir)


def wait_until(
    condition: Callable[[], object], why: Callable[[], str], timeout: float = _PROBE_SECONDS
) -> None:
    """Wait for ``condition``; on time-out fail with ``why()`` (logs, read only then)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, why()
        time.sleep(0.2)
