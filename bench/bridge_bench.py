"""The bridge service as a client tenant sees it, beside ``gather`` in the same run.

Starts its own redis-server, one worker (2 pool processes) and one ``airlock bridge``
(concurrency 4, quota 2), adds a tenant with the users.conf template's rules, then measures:

- one small text request at a time, ``SET`` into a slot until its answer key exists (p50/p95),
  interleaved with ``gather`` of the same file (no result cache), and their p50 ratio;
- 100 small requests from one tenant, sent as fast as its slots free, until all are answered;
- the same from four tenants at once (25 each).

Run: ``.venv/bin/python bench/bridge_bench.py`` (about a minute). docs/bridge-service.md,
Measured, quotes its output.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from redis import Redis

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # the suite's RedisServer, from tests/

from workers import start_worker, stop_worker  # noqa: E402

from bridge.knowledge.attachments import AttachmentRef  # noqa: E402
from bridge.queue.celery_queue import CeleryQueue  # noqa: E402
from bridge.queue.source import gather  # noqa: E402
from bridge.service import tenants  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

USERS = REPO / "deploy" / "redis" / "users.conf"
_ROUNDS = 100


def add_tenant(admin: Redis, name: str) -> Redis:
    """The tenant's user as the start scripts write it, and a connection as that user."""
    (template,) = [
        line for line in USERS.read_text().splitlines() if line.startswith("user client-")
    ]
    rules = template.replace("{tenant}", name).split()[2:]
    admin.execute_command("ACL", "SETUSER", f"client-{name}", "reset", *rules, f">{name}pw")  # type: ignore[no-untyped-call]
    port = admin.connection_pool.connection_kwargs["port"]
    return Redis(port=port, username=f"client-{name}", password=f"{name}pw")


def document(request_id: str, text: bytes) -> str:
    attachment = {
        "label": "a.txt",
        "kind": "text",
        "media_type": "text/plain",
        "payload_b64": base64.b64encode(text).decode(),
    }
    return json.dumps({"v": 1, "request_id": request_id, "attachments": [attachment]})


def submit(client: Redis, tenant: str, raw: str) -> None:
    while True:
        for slot in range(tenants.SLOTS):
            if client.set(tenants.slot_key(tenant, slot), raw, nx=True):
                return
        time.sleep(0.001)


def wait_answer(client: Redis, tenant: str, request_id: str) -> None:
    key = tenants.selection_key(tenant, request_id)
    deadline = time.monotonic() + 60
    while client.get(key) is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"no answer to {tenant}/{request_id}")
        time.sleep(0.001)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def burst(clients: dict[str, Redis], per_tenant: int, tag: str) -> float:
    """Requests per second until every tenant's ``per_tenant`` requests are answered."""

    def one(tenant: str, client: Redis) -> None:
        for i in range(per_tenant):
            submit(client, tenant, document(f"{tag}-{i}", f"burst {tag} {i}\n".encode()))
        for i in range(per_tenant):
            wait_answer(client, tenant, f"{tag}-{i}")

    started = time.monotonic()
    threads = [threading.Thread(target=one, args=item) for item in clients.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per_tenant * len(clients) / (time.monotonic() - started)


def main() -> None:
    server = RedisServer(Path(tempfile.mkdtemp(prefix="airlock-bench-redis-")))
    server.start()
    url = server.url()
    worker = start_worker(url)
    admin = server.client()
    names = ["t0", "t1", "t2", "t3"]
    clients = {name: add_tenant(admin, name) for name in names}
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    environment.update(AIRLOCK_BROKER_URL=url, AIRLOCK_METRICS_PORT="0", PYTHONPATH=str(REPO))
    bridge = subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "airlock"), "bridge"],
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    queue = CeleryQueue(url, url)
    try:
        client = clients["t0"]
        submit(client, "t0", document("warm", b"warm\n"))
        wait_answer(client, "t0", "warm")
        through_bridge, through_gather = [], []
        for i in range(_ROUNDS):
            text = f"round {i}\n".encode()
            started = time.monotonic()
            submit(client, "t0", document(f"r{i}", text))
            wait_answer(client, "t0", f"r{i}")
            through_bridge.append(time.monotonic() - started)
            started = time.monotonic()
            gather([AttachmentRef("a.txt", "text", "text/plain", text)], queue, use_cache=False)
            through_gather.append(time.monotonic() - started)
        p50_bridge, p50_gather = percentile(through_bridge, 0.5), percentile(through_gather, 0.5)
        print(
            f"one request at a time, p50 / p95: bridge {p50_bridge * 1000:.1f} / "
            f"{percentile(through_bridge, 0.95) * 1000:.1f} ms, gather {p50_gather * 1000:.1f} / "
            f"{percentile(through_gather, 0.95) * 1000:.1f} ms, p50 ratio "
            f"{p50_bridge / p50_gather:.2f}"
        )
        print(f"100 requests, one tenant: {burst({'t0': client}, 100, 'one'):.0f} per second")
        print(f"100 requests, four tenants: {burst(clients, 25, 'four'):.0f} per second")
    finally:
        queue.close()
        bridge.terminate()
        bridge.wait(60)
        stop_worker(worker)
        for connection in clients.values():
            connection.close()
        admin.close()
        server.stop()


if __name__ == "__main__":
    main()
