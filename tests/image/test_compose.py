"""deploy/compose.yaml started the way users start it, `podman compose -f deploy/compose.yaml
up -d` (podman-compose, through scripts/podman), on the image scripts/image built: every
container healthy, hardened as the file says, the smoke job answered through the bridge by the
light and OCR workers, and a clean stop.

Two things a host with a registry and systemd would do are done here by the test: the image
`redis:7.2-bookworm` is the local stand-in (tests/image/redis.Containerfile), and health checks,
which podman runs from systemd timers, are run with `podman healthcheck run`. podman-compose on
podman 4.3 starts services without waiting for `condition: service_healthy`; the workers retry
the broker until Redis answers.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.image.conftest import HERE, SMOKE_FILES, as_streamed
from tests.image.pod import PODMAN, REPO, TENANT, podman, wait_until

pytestmark = [pytest.mark.image, pytest.mark.slow, pytest.mark.timeout(1800)]

COMPOSE = REPO / "deploy" / "compose.yaml"
AIRLOCK_SERVICES = ("light-worker", "ocr-worker", "bridge")
_HEALTHY_SECONDS = 120.0


@dataclass(frozen=True)
class Stack:
    project: str
    password: str  # Redis user `worker`
    client_password: str  # Redis user `client-smoke`

    def compose(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "AIRLOCK_REDIS_PASSWORD": self.password,
            "AIRLOCK_REDIS_CLIENTS": f"{TENANT}:{self.client_password}",
            "AIRLOCK_RESULT_CACHE_KEY": self.password * 2,  # hex, 64 digits
        }
        env.pop("FLOWER_BASIC_AUTH", None)  # Flower's profile is not started: not needed
        return subprocess.run(
            [str(PODMAN), "compose", "--project-name", self.project, "-f", str(COMPOSE), *args],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    def containers(self) -> dict[str, str]:
        """Service name -> container name, of every container of this project."""
        listed = podman("ps", "--all", "--format", "json",
                        "--filter", f"label=com.docker.compose.project={self.project}")  # fmt: skip
        return {
            c["Labels"]["com.docker.compose.service"]: c["Names"][0]
            for c in json.loads(listed.stdout)
        }

    def inspect(self, service: str) -> dict[str, Any]:
        (document,) = json.loads(podman("inspect", self.containers()[service]).stdout)
        return dict(document)

    def client_url(self) -> str:
        """The clients' Redis as the bridge reaches it, logged in as the tenant's user: read
        from the running bridge, so the test follows whatever address compose.yaml sets."""
        env = dict(entry.split("=", 1) for entry in self.inspect("bridge")["Config"]["Env"])
        address = urlsplit(env["AIRLOCK_CLIENT_REDIS_URL"])
        login = f"client-{TENANT}:{self.client_password}"
        return urlunsplit(address._replace(netloc=f"{login}@{address.hostname}:{address.port}"))


@pytest.fixture(scope="module")
def stack(image: str, redis_image: str) -> Iterator[Stack]:
    project = f"airlock-test-{secrets.token_hex(4)}"
    stack = Stack(project, secrets.token_hex(32), secrets.token_hex(32))
    try:
        up = stack.compose("up", "-d")
        assert up.returncode == 0, up.stderr[-4000:]
        yield stack
    finally:
        stack.compose("down", "--volumes", "--timeout", "10")


def test_up_starts_the_stack_without_flower(stack: Stack) -> None:
    assert set(stack.containers()) == {"redis", "client-redis", *AIRLOCK_SERVICES}


def test_every_health_check_passes(stack: Stack) -> None:
    for service, container in stack.containers().items():
        wait_until(
            lambda c=container: podman("healthcheck", "run", c, check=False).returncode == 0,  # type: ignore[misc]
            lambda s=service: f"{s} never healthy:\n{podman('logs', stack.containers()[s]).stderr}",  # type: ignore[misc]
            timeout=_HEALTHY_SECONDS,
        )


def _default_route(container: str) -> bool:
    routes = podman("exec", container, "cat", "/proc/net/route").stdout.splitlines()[1:]
    return any(line.split()[1] == "00000000" for line in routes)


def test_containers_run_as_the_file_says(stack: Stack) -> None:
    for service in AIRLOCK_SERVICES:
        container = stack.inspect(service)
        host = container["HostConfig"]
        assert container["Config"]["User"] == "10001:10001"
        assert host["ReadonlyRootfs"] is True
        assert container["EffectiveCaps"] in (None, [])
        assert "no-new-privileges" in host["SecurityOpt"]
        assert host["PidsLimit"] == 512
        assert host["Init"] is True
        assert "noexec" in host["Tmpfs"]["/tmp"]
        # Only the internal network, which has no gateway: nothing off the host is reachable.
        assert list(container["NetworkSettings"]["Networks"]) == [f"{stack.project}_internal"]
        assert not _default_route(container["Name"])
    for service, networks in (
        ("redis", {f"{stack.project}_internal"}),
        ("client-redis", {f"{stack.project}_internal", f"{stack.project}_clients"}),
    ):
        redis = stack.inspect(service)
        assert redis["Config"]["User"] == "999:999"
        assert redis["HostConfig"]["ReadonlyRootfs"] is True
        assert set(redis["NetworkSettings"]["Networks"]) == networks


def test_doctor_passes_in_every_airlock_container(stack: Stack) -> None:
    for service in AIRLOCK_SERVICES:
        result = podman("exec", stack.containers()[service], "airlock", "doctor", check=False)
        assert result.returncode == 0, f"{service}: {result.stdout}{result.stderr}"


def test_the_smoke_job_through_the_bridge_and_both_workers(
    stack: Stack, image: str, corpus_dir: Path, embedded: dict[str, Any]
) -> None:
    """An application on the `clients` network sends the request, as docs/operations.md says
    applications do; the scanned PDF goes from the light worker to the OCR worker."""
    url = stack.client_url()
    client = podman(
        "run", "--rm", "--network", f"{stack.project}_clients", "--no-healthcheck",
        "--user", "10001:10001", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--read-only", "--tmpfs", "/tmp",
        "-v", f"{HERE / 'bridge_client.py'}:/client/bridge_client.py:ro",
        "-v", f"{corpus_dir}:/in:ro", "--entrypoint", "python", image,
        "/client/bridge_client.py", url, TENANT, "compose-smoke",
        *(f"/in/{n}" for n in SMOKE_FILES),
        timeout=600,
    )  # fmt: skip
    answer = json.loads(client.stdout)
    assert answer["selection"] == as_streamed(embedded)


def test_stop_lets_every_container_exit_cleanly(stack: Stack) -> None:
    """SIGTERM through the init process, within the grace periods: workers shut down warm."""
    stop = stack.compose("stop")
    assert stop.returncode == 0, stop.stderr[-4000:]
    for service in ("redis", "client-redis", *AIRLOCK_SERVICES):
        state = stack.inspect(service)["State"]
        assert (state["Status"], state["ExitCode"]) == ("exited", 0), service
