"""The shipped Redis users (deploy/redis/users.conf) in a real ``redis-server``: workers and the
bridge service run as ``worker`` and need nothing beyond it; a bridge-service client, as
``client``, gets its answer and cannot write anything a worker or another caller reads as one.

Before these users every client shared the workers' password, so any of them could plant text
under ``airlock:extracted:<key>`` (computable offline from a document's SHA-256), forge a
result, or push a job; the MAC on cached results catches the first, the ACL stops all of them
at Redis.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError
from redis.retry import Retry

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.claim_check import sha256_hex
from bridge.queue.source import gather
from tests.deploy.conftest import COMPOSE, load_yaml, run_redis_start
from tests.helpers import selection_as_json
from tests.integration.conftest import WorkerFactory, worker_env
from tests.integration.processes import STREAMS, BridgeProcess, health
from tests.integration.refs import local
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

PASSWORDS = {"worker": "a1" * 16, "client": "c2" * 16}
#: The harness's own user, for setting up and reading the ACL log; not part of the deployment.
ADMIN = ("harness", "e3" * 16)
_ANSWER_SECONDS = 60.0


def users_config(directory: Path) -> Path:
    """The config file deploy/compose.yaml's Redis start script writes from users.conf and the
    passwords (the script itself, run with redis-server recorded), plus the harness's user."""
    ((compose,),) = load_yaml(COMPOSE).values()
    script = compose["services"]["redis"]["command"][-1].replace("$$", "$")
    passwords = {
        "REDIS_PASSWORD": PASSWORDS["worker"],
        "REDIS_CLIENT_PASSWORD": PASSWORDS["client"],
    }
    started = run_redis_start(script, directory / "start", passwords)
    path = directory / "users.conf"
    path.write_text(f"{started.auth_conf}user {ADMIN[0]} on >{ADMIN[1]} ~* &* +@all\n")
    return path


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    (directory / "start").mkdir(parents=True)
    server = RedisServer(directory, None, "--include", str(users_config(directory)), login=ADMIN)
    server.start()
    yield server
    server.stop()


def as_user(server: RedisServer, user: str) -> str:
    return server.url(login=(user, PASSWORDS[user]))


def wait_for(condition: Callable[[], object], why: str) -> None:
    deadline = time.monotonic() + _ANSWER_SECONDS
    while not condition():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


def test_workers_and_the_bridge_need_only_the_worker_user_and_clients_only_read_answers(
    acl_redis: RedisServer, tmp_path: Path
) -> None:
    worker_url = as_user(acl_redis, "worker")
    markers = tmp_path / "markers"
    markers.mkdir()
    heartbeat = {"AIRLOCK_HEARTBEAT_FILE": str(tmp_path / "heartbeat")}
    workers = WorkerFactory(worker_url, markers, tmp_path)
    bridge_env = worker_env(
        worker_url,
        markers,
        {"AIRLOCK_BRIDGE_CONSUMER": "b1", "AIRLOCK_LOG_FORMAT": "plain"},
    )
    bridge = BridgeProcess("b1", bridge_env, tmp_path / "bridge.log")
    admin = acl_redis.client()
    client = Redis.from_url(as_user(acl_redis, "client"))
    try:
        # As the deployments run it: its gossip and heartbeat use keys and channels of their own.
        worker = workers(concurrency=1, env=heartbeat, via_cli=True, without=())
        bridge.wait_ready()

        # A request through the stream, as the client user, answered byte for byte as the
        # embedded path answers it; the client reads it back from both places it is published.
        text = AttachmentRef("hello.txt", "text", "text/plain", b"hello from a client\n")
        document = {
            "v": 1,
            "request_id": "acl-1",
            "attachments": [
                {
                    "label": text.label,
                    "kind": text.kind,
                    "media_type": text.media_type,
                    "payload_b64": base64.b64encode(text.payload).decode(),
                }
            ],
        }
        client.xadd(STREAMS.request_stream, {"request": json.dumps(document)})
        key = "airlock:selection:acl-1"
        wait_for(lambda: client.get(key) is not None, f"no answer:\n{bridge.log()[-3000:]}")
        answer = json.loads(client.get(key) or b"")
        assert answer["selection"] == selection_as_json(local([text]))
        read: Any = client.xread({STREAMS.result_stream: "0-0"})  # bytes; typed for both modes
        ((_, entries),) = read
        assert [json.loads(fields[b"result"]) for _, fields in entries] == [answer]
        newest: Any = client.xrevrange(STREAMS.result_stream, count=1)
        assert newest[0][0] == entries[-1][0]

        # `gather` as the worker user, twice: the second answer comes from the result cache,
        # which the worker user writes and reads (with its MAC).
        refs = [AttachmentRef("g.txt", "text", "text/plain", b"gathered as the worker user\n")]
        with closing(CeleryQueue(worker_url, worker_url)) as queue:
            for _ in range(2):
                assert gather(refs, queue, deadline=30) == local(refs)
        # The worker's readiness probe: a ping through the broker to this worker's node.
        probe_env = worker_env(worker_url, markers, heartbeat)
        assert health("--ready", "--worker", "--timeout", "5", env=probe_env) == 0

        # Nothing the workers, the bridge, `gather` or the probe did was refused: the worker
        # user's rules hold everything they use.
        refused = [entry for entry in admin.acl_log() if entry["username"] == "worker"]
        assert refused == [], refused

        # Every write a client could poison an answer with is refused, and changes nothing.
        cached = next(iter(admin.scan_iter("airlock:extracted:*")))
        before = admin.get(cached)
        payload_key = f"airlock:payload:{sha256_hex(refs[0].payload)}"
        admin.set(payload_key, refs[0].payload)
        result_channel = "celery-task-meta-00000000-0000-0000-0000-000000000000"
        forbidden: list[tuple[str, ...]] = [
            ("SET", cached.decode(), "an attacker's IBAN"),
            ("SET", payload_key, "other bytes"),
            ("LPUSH", "airlock.light", "{}"),
            ("PUBLISH", result_channel, "{}"),
            ("SET", result_channel, "{}"),
            ("XADD", STREAMS.result_stream, "*", "result", "{}"),
            ("SET", "airlock:selection:acl-2", "{}"),
            ("DEL", key),
            ("HSET", "unacked", "x", "{}"),
            ("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", cached.decode()),
            ("FLUSHALL",),
            ("CONFIG", "GET", "*"),
            ("KEYS", "*"),
            # Nor can a client read what others sent: requests and payloads are not its own.
            ("XRANGE", STREAMS.request_stream, "-", "+"),
            ("GET", payload_key),
            ("SUBSCRIBE", result_channel),
        ]
        for command in forbidden:
            with pytest.raises(NoPermissionError):
                client.execute_command(*command)  # type: ignore[no-untyped-call]
        assert admin.get(cached) == before
        assert admin.get(payload_key) == refs[0].payload
        assert admin.llen("airlock.light") == 0
        assert admin.xlen(STREAMS.result_stream) == 1
        assert admin.get(key) is not None and not admin.exists("airlock:selection:acl-2")
        assert worker.process.poll() is None and bridge.process.poll() is None
    finally:
        client.close()
        admin.close()
        bridge.stop()
        workers.stop_all()


def test_a_connection_without_a_user_can_do_nothing(acl_redis: RedisServer) -> None:
    """The default user is off: no password alone (the old requirepass way), no anonymous
    connection, and no user's password under another user's name."""
    once = Retry(NoBackoff(), 0)  # a refusal is final: redis-py would retry it with backoff
    anonymous = Redis(port=acl_redis.port, protocol=2, retry=once)  # RESP2: no HELLO first
    with pytest.raises(AuthenticationError, match="Authentication required"):
        anonymous.get("airlock:selection:acl-1")
    anonymous.close()
    for user in (None, "client"):
        login = Redis(port=acl_redis.port, username=user, password=PASSWORDS["worker"], retry=once)
        with pytest.raises(AuthenticationError, match="invalid username-password pair"):
            login.ping()
        login.close()
