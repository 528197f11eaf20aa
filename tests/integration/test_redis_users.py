"""The shipped Redis users (deploy/redis/users.conf) in a real ``redis-server`` started with the
compose deployment's own arguments and the file its start script writes: workers and the
bridge service run as ``worker`` and need nothing beyond it; a client tenant, as its own user
``client-<tenant>``, submits requests and reads its own answers, and nothing else.

Before these users every client shared the workers' password, so any of them could plant text
under ``airlock:extracted:<key>``, forge a result, or push a job. Then one shared ``client``
user could still end the request stream for everyone with the largest entry ID, fill database
5 to ``maxmemory``, block Redis for seconds with a 2 M-field entry, queue unbounded junk ahead
of everyone and read every other client's answers (issue 20). Each attack is run here as a
client, while an honest tenant's requests must still be answered within their deadline and
the worker user's writes must still succeed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.claim_check import sha256_hex
from bridge.queue.source import gather
from bridge.service import tenants
from tests.deploy.conftest import COMPOSE, load_yaml, run_redis_start
from tests.helpers import selection_as_json
from tests.integration.conftest import WorkerFactory, WorkerProcess, worker_env
from tests.integration.processes import (
    STREAMS,
    BridgeProcess,
    attachment,
    health,
    request,
    submit,
    tenant_answer,
)
from tests.integration.refs import local
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

WORKER_PASSWORD = "a1" * 16
#: acme is the honest tenant, bravo the attacker.
CLIENTS = {"acme": "c2" * 16, "bravo": "d4" * 16}
#: The harness's own user, for setting up and reading the ACL log; not part of the deployment.
ADMIN = ("harness", "e3" * 16)
#: The default deadline of a request (docs/bridge-service.md): what an honest client waits.
DEADLINE_SECONDS = 30.0
_MIB = 1024 * 1024
#: The largest entry ID a stream can hold: XADD with it made every later XADD fail.
MAX_ID = "18446744073709551615-18446744073709551615"


def shipped_redis(
    directory: Path, service: str = "client-redis", clients: dict[str, str] = CLIENTS
) -> list[str]:
    """Arguments for a redis-server as deploy/compose.yaml runs ``service``: the config file
    its start script writes from users.conf and the passwords (the script itself, run with
    redis-server recorded), plus the harness's user; and the arguments that script gives
    redis-server (maxmemory, proto-max-bulk-len, ...), less its data directory."""
    ((compose,),) = load_yaml(COMPOSE).values()
    script = compose["services"][service]["command"][-1].replace("$$", "$")
    passwords = {
        "REDIS_PASSWORD": WORKER_PASSWORD,
        "REDIS_CLIENTS": " ".join(f"{name}:{password}" for name, password in clients.items()),
    }
    (directory / "start").mkdir(parents=True)
    started = run_redis_start(script, directory / "start", passwords)
    path = directory / "users.conf"
    path.write_text(f"{started.auth_conf}user {ADMIN[0]} on >{ADMIN[1]} ~* &* +@all\n")
    arguments = started.argv[2:]  # past --include <the start script's file>
    at = arguments.index("--dir")
    return ["--include", str(path), *arguments[:at], *arguments[at + 2 :]]


@dataclass
class Stack:
    """Redis with the shipped users, one worker and one bridge, all logged in as `worker`."""

    server: RedisServer
    worker: WorkerProcess
    bridge: BridgeProcess
    admin: Redis
    markers: Path
    #: The worker's heartbeat settings, which its readiness probe reads its node name from.
    heartbeat: dict[str, str]

    def url(self, user: str) -> str:
        password = WORKER_PASSWORD if user == "worker" else CLIENTS[user.removeprefix("client-")]
        return self.server.url(login=(user, password))

    def client(self, tenant: str) -> Redis:
        return Redis.from_url(self.url(f"client-{tenant}"))

    def worker_refusals(self) -> list[Any]:
        return [entry for entry in self.admin.acl_log() if entry["username"] == "worker"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("redis-users")
    # One Redis for workers and clients alike, as a deployment without a clients' Redis runs
    # it (AIRLOCK_CLIENT_REDIS_URL unset): every attack below must hold even there.
    arguments = shipped_redis(directory / "redis")
    server = RedisServer(directory / "redis", None, *arguments, login=ADMIN)
    server.start()
    markers = directory / "markers"
    markers.mkdir()
    worker_url = server.url(login=("worker", WORKER_PASSWORD))
    heartbeat = {"AIRLOCK_HEARTBEAT_FILE": str(directory / "heartbeat")}
    workers = WorkerFactory(worker_url, markers, directory)
    bridge_env = worker_env(
        worker_url, markers, {"AIRLOCK_BRIDGE_CONSUMER": "b1", "AIRLOCK_LOG_FORMAT": "plain"}
    )
    bridge = BridgeProcess("b1", bridge_env, directory / "bridge.log")
    admin = server.client()
    try:
        # As the deployments run it: its gossip and heartbeat use keys and channels of their own.
        worker = workers(concurrency=2, env=heartbeat, via_cli=True, without=())
        bridge.wait_ready()
        yield Stack(server, worker, bridge, admin, markers, heartbeat)
    finally:
        admin.close()
        bridge.stop()
        workers.stop_all()
        server.stop()


def text_request(request_id: str, text: bytes, **extra: Any) -> dict[str, Any]:
    return request(
        request_id, AttachmentRef(f"{request_id}.txt", "text", "text/plain", text), **extra
    )


def answered_in_time(client: Redis, tenant: str, request_id: str) -> float:
    """Submit a small request as ``tenant`` and return how long its answer took, asserting it
    is the embedded path's answer and came within the request's deadline."""
    text = f"honest text of {request_id}\n".encode()
    started = time.monotonic()
    submit(client, tenant, text_request(request_id, text))
    answer = tenant_answer(client, tenant, request_id, timeout=DEADLINE_SECONDS)
    took = time.monotonic() - started
    ref = AttachmentRef(f"{request_id}.txt", "text", "text/plain", text)
    assert answer["selection"] == selection_as_json(local([ref]))
    return took


def assert_worker_writes_succeed(stack: Stack, tag: str) -> None:
    """What the worker user writes in the service's normal course: a claim check, a job on a
    queue, a result on the result stream; none refused (OOM, NOPERM, an exhausted stream)."""
    worker = Redis.from_url(stack.url("worker"))
    try:
        key = f"airlock:payload:{sha256_hex(tag.encode())}"
        assert worker.set(key, tag.encode(), ex=60)
        assert worker.lpush(f"airlock.probe.{tag}", "{}") == 1
        assert worker.xadd(STREAMS.result_stream, {"result": "{}"}, maxlen=100)
        worker.delete(key, f"airlock.probe.{tag}")
    finally:
        worker.close()
    assert stack.worker_refusals() == []


def refused(client: Redis, *command: object) -> None:
    with pytest.raises(NoPermissionError):
        client.execute_command(*command)  # type: ignore[no-untyped-call]


def test_workers_and_the_bridge_need_only_the_worker_user_and_clients_only_their_answers(
    stack: Stack,
) -> None:
    worker_url = stack.url("worker")
    client = stack.client("acme")
    try:
        # A request through the tenant's inbox, answered byte for byte as the embedded path
        # answers it; the client reads it back from both places it is published.
        text = AttachmentRef("hello.txt", "text", "text/plain", b"hello from a client\n")
        document = {"v": 1, "request_id": "acl-1", "attachments": [attachment(text)]}
        submit(client, "acme", document)
        answer = tenant_answer(client, "acme", "acl-1")
        assert answer["selection"] == selection_as_json(local([text]))
        key = tenants.selection_key("acme", "acl-1")
        read: Any = client.xread({tenants.result_stream("acme"): "0-0"})
        ((_, entries),) = read
        assert [json.loads(fields[b"result"]) for _, fields in entries] == [answer]
        newest: Any = client.xrevrange(tenants.result_stream("acme"), count=1)
        assert newest[0][0] == entries[-1][0]
        assert client.xlen(tenants.result_stream("acme")) == 1

        # `gather` as the worker user, twice: the second answer comes from the result cache,
        # which the worker user writes and reads (with its MAC).
        refs = [AttachmentRef("g.txt", "text", "text/plain", b"gathered as the worker user\n")]
        with closing(CeleryQueue(worker_url, worker_url)) as queue:
            for _ in range(2):
                assert gather(refs, queue, deadline=30) == local(refs)
        # The worker's readiness probe: a ping through the broker to this worker's node. The
        # rules are under test, not the ping's speed: 5 s once passed unanswered while the
        # machine ran another suite beside this one.
        probe_env = worker_env(worker_url, stack.markers, stack.heartbeat)
        assert health("--ready", "--worker", "--timeout", "20", env=probe_env) == 0

        # Nothing the workers, the bridge, `gather` or the probe did was refused: the worker
        # user's rules hold everything they use.
        assert stack.worker_refusals() == []

        # Every write a client could poison an answer with is refused, and changes nothing.
        admin = stack.admin
        cached = next(iter(admin.scan_iter("airlock:extracted:*")))
        before = admin.get(cached)
        payload_key = f"airlock:payload:{sha256_hex(refs[0].payload)}"
        admin.set(payload_key, refs[0].payload)
        result_channel = "celery-task-meta-00000000-0000-0000-0000-000000000000"
        results_before = admin.xlen(STREAMS.result_stream)
        forbidden: list[tuple[str, ...]] = [
            ("SET", cached.decode(), "an attacker's IBAN"),
            ("SET", payload_key, "other bytes"),
            ("LPUSH", "airlock.light", "{}"),
            ("PUBLISH", result_channel, "{}"),
            ("SET", result_channel, "{}"),
            ("XADD", STREAMS.result_stream, "*", "result", "{}"),
            ("XADD", tenants.result_stream("acme"), "*", "result", "{}"),
            ("XADD", STREAMS.request_stream, "*", "request", "{}"),
            ("SET", tenants.selection_key("acme", "acl-2"), "{}"),
            ("SET", "airlock:selection:acl-2", "{}"),
            ("DEL", key),
            ("HSET", "unacked", "x", "{}"),
            ("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", cached.decode()),
            ("KEYS", "*"),
            ("SELECT", "5"),
            # Its inbox is write only, and eight keys: no ninth slot, no other key beside it.
            ("GET", tenants.slot_key("acme", 0)),
            ("SET", "airlock:tenant:acme:in:8", "{}"),
            ("SET", "airlock:tenant:acme:in:10", "{}"),
            ("SET", "airlock:tenant:acme:held", "{}"),
            ("APPEND", tenants.slot_key("acme", 0), "x"),
            ("SETRANGE", tenants.slot_key("acme", 0), str(500 * _MIB), "x"),
            # Nor can a client read what others sent: requests and payloads are not its own.
            ("XRANGE", STREAMS.request_stream, "-", "+"),
            ("GET", payload_key),
            ("SUBSCRIBE", result_channel),
            ("GET", "airlock:selection:acl-1"),
            ("XRANGE", STREAMS.result_stream, "-", "+"),
        ]
        for command in forbidden:
            refused(client, *command)
        # Renamed away by the shipped arguments: no user at all can run these.
        for gone in (("FLUSHALL",), ("CONFIG", "GET", "*")):
            with pytest.raises(ResponseError, match="unknown command"):
                client.execute_command(*gone)  # type: ignore[no-untyped-call]
        assert admin.get(cached) == before
        assert admin.get(payload_key) == refs[0].payload
        assert admin.llen("airlock.light") == 0
        assert admin.xlen(STREAMS.result_stream) == results_before
        assert admin.get(key) is not None and not admin.exists("airlock:selection:acl-2")
        assert not admin.exists(tenants.selection_key("acme", "acl-2"))
        assert stack.worker.process.poll() is None and stack.bridge.process.poll() is None
    finally:
        client.close()


def test_a_function_runs_with_its_callers_rights_only(stack: Stack) -> None:
    """Why a client gets no FCALL to append for it: Redis 7.0 checks every command a function
    runs against the calling user's ACL, so a function that XADDs with ``*`` and caps sizes
    would still need the caller to hold XADD itself, with every ID and size it allows."""
    stack.admin.function_load(
        "#!lua name=airlock_probe\n"
        "redis.register_function('append', function(keys, args)\n"
        "  return redis.call('XADD', keys[1], '*', 'request', args[1]) end)",
        replace=True,
    )
    mine = f"airlock:tenant:acme:probe:{time.monotonic_ns()}"
    stack.admin.acl_setuser(
        "probe",
        enabled=True,
        passwords=["+pr0be"],
        commands=["+fcall"],
        keys=[mine],
        reset=True,
    )
    probe = Redis.from_url(stack.server.url(login=("probe", "pr0be")))
    try:
        with pytest.raises(ResponseError, match="can't run this command"):
            probe.fcall("append", 1, mine, "{}")
        assert not stack.admin.exists(mine)
    finally:
        probe.close()
        stack.admin.acl_deluser("probe")
        stack.admin.function_delete("airlock_probe")


def test_the_largest_entry_id_cannot_end_any_stream(stack: Stack) -> None:
    attacker = stack.client("bravo")
    honest = stack.client("acme")
    try:
        for stream in (
            STREAMS.request_stream,
            STREAMS.result_stream,
            tenants.result_stream("bravo"),
            tenants.slot_key("bravo", 0),
        ):
            refused(attacker, "XADD", stream, MAX_ID, "request", "x")
        # Nor through a script, nor by trimming others' queued requests away.
        refused(attacker, "EVAL", f"return redis.call('XADD', KEYS[1], '{MAX_ID}', 'a', 'b')",
                "1", STREAMS.request_stream)  # fmt: skip
        refused(attacker, "XADD", STREAMS.request_stream, "MAXLEN", "0", "*", "request", "x")
        info: Any = stack.admin.xinfo_stream(STREAMS.request_stream)
        assert info["last-generated-id"] != MAX_ID.encode()
        # The bridge's intake still appends to the request stream, and answers.
        took = answered_in_time(honest, "acme", "after-max-id")
        assert took < DEADLINE_SECONDS
        assert_worker_writes_succeed(stack, "max-id")
    finally:
        attacker.close()
        honest.close()


def used_memory(admin: Redis) -> int:
    return int(admin.info("memory")["used_memory"])


def test_no_database_of_its_own_and_eight_slots_bound_a_clients_memory(stack: Stack) -> None:
    """The attack that filled maxmemory (768 MB) in 5.2 s: 46 values of 16 MiB in a database
    nothing reads. SELECT is refused, and in database 0 a client has eight keys, each holding
    one value: Redis's own memory for it stays at most eight such values, whatever it sends,
    and over-cap values are deleted unread by the bridge's intake."""
    attacker = stack.client("bravo")
    honest = stack.client("acme")
    refused(attacker, "SELECT", "5")
    baseline = used_memory(stack.admin)
    value = b"\x00" * (16 * _MIB)  # proto-max-bulk-len: the largest value Redis accepts
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], used_memory(stack.admin))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        flooded_at = time.monotonic()
        for i in range(46):
            attacker.set(tenants.slot_key("bravo", i % tenants.SLOTS), value)
        flood_seconds = time.monotonic() - flooded_at
        # An honest request is answered right after, and the workers' writes succeed.
        took = answered_in_time(honest, "acme", "after-memory")
    finally:
        done.set()
        sampler.join()
        attacker.close()
        honest.close()
    grown = peak[0] - baseline
    print(
        f"46 x 16 MiB as a client in {flood_seconds:.2f} s: Redis grew "
        f"{grown / _MIB:.0f} MiB at peak; honest answer in {took:.2f} s"
    )
    # Eight slots of 16 MiB, with room for Redis's own buffers of one value in flight.
    assert grown <= (tenants.SLOTS + 2) * 16 * _MIB
    assert took < DEADLINE_SECONDS
    assert_worker_writes_succeed(stack, "memory")
    # Every over-cap value was deleted unread: nothing of the flood is left in Redis.
    deadline = time.monotonic() + DEADLINE_SECONDS
    while any(stack.admin.exists(tenants.slot_key("bravo", i)) for i in range(tenants.SLOTS)):
        assert time.monotonic() < deadline, "the over-cap slots were not emptied"
        time.sleep(0.05)
    assert any(
        letter.get(b"tenant") == b"bravo" and b"over the request cap" in letter[b"reason"]
        for letter in dead_letters(stack.admin)
    )
    assert used_memory(stack.admin) - baseline < 16 * _MIB


def dead_letters(admin: Redis) -> list[dict[bytes, bytes]]:
    """The dead-letter stream's entries: the intake's (tenant, slot, reason) and the bridge's
    (entry_id, reason)."""
    entries: Any = admin.xrange(STREAMS.dead_letter_stream)
    return [fields for _, fields in entries]


def peak_memory_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_two_million_fields_never_reach_a_stream_nor_the_parser(stack: Stack) -> None:
    """The entry of 2,000,000 tiny fields that made the read script build a 4-million-element
    reply (Redis BUSY for 6-13 s, a worker's LPUSH waiting 5-10 s, the bridge at 336 MiB).
    XADD is refused outright; the same count of values as one string in a slot is refused by
    the bridge before it parses anything."""
    attacker = stack.client("bravo")
    honest = stack.client("acme")
    worker = Redis.from_url(stack.url("worker"))
    try:
        fields = {f"{i:x}".encode(): b"" for i in range(2_000_000)}
        refused(
            attacker, "XADD", STREAMS.request_stream, "*", *[x for kv in fields.items() for x in kv]
        )
        del fields
        before = peak_memory_bytes(stack.bridge.process.pid)
        # 2,000,000 values in one document, 10.3 MB: under the request cap, so it is read.
        document = (
            b'{"v":1,"request_id":"fields","attachments":['
            + b"0," * 1_999_999
            + b"{}],"
            + b'"x":"'
            + b"a" * 6_300_000
            + b'"}'
        )
        assert len(document) < 12 * _MIB
        lpush_seconds = []
        submit(attacker, "bravo", document)
        del document
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not any(b"JSON values" in letter[b"reason"] for letter in dead_letters(stack.admin)):
            started = time.monotonic()
            worker.lpush("airlock.probe.fields", "{}")
            lpush_seconds.append(time.monotonic() - started)
            assert time.monotonic() < deadline, stack.bridge.log()[-3000:]
            time.sleep(0.01)
        worker.delete("airlock.probe.fields")
        grown = peak_memory_bytes(stack.bridge.process.pid) - before
        took = answered_in_time(honest, "acme", "after-fields")
    finally:
        worker.close()
        attacker.close()
        honest.close()
    print(
        f"2 M values in a slot: bridge peak grew {grown / _MIB:.1f} MiB, slowest worker "
        f"LPUSH {max(lpush_seconds) * 1000:.1f} ms, honest answer {took:.2f} s"
    )
    assert grown < 64 * _MIB
    assert max(lpush_seconds) < 0.5
    assert "Slow script" not in stack.server.log_path.read_text()
    assert took < DEADLINE_SECONDS
    assert_worker_writes_succeed(stack, "fields")


def test_a_flooding_client_holds_its_quota_and_an_honest_one_is_answered_during_the_flood(
    stack: Stack,
) -> None:
    """Junk used to enter at ~25,000 requests/s against one bridge's 1,259/s, all of it ahead
    of everyone else's. Now a client's requests wait in its eight slots, the bridge takes one
    per tenant in turn, and at most AIRLOCK_BRIDGE_CLIENT_QUOTA (2) of one tenant's are held
    at once: the honest tenant's next request is the next taken in."""
    attacker = stack.client("bravo")
    honest = stack.client("acme")
    sent = [0]
    held_seen = [0]
    done = threading.Event()
    flood_seconds = 12.0

    def flood() -> None:
        ended = time.monotonic() + flood_seconds
        while not done.is_set() and time.monotonic() < ended:
            for slot in range(tenants.SLOTS):
                document = text_request(f"junk-{sent[0]}", b"junk " * 20)
                if attacker.set(tenants.slot_key("bravo", slot), json.dumps(document), nx=True):
                    sent[0] += 1

    def watch() -> None:
        while not done.is_set():
            held_seen[0] = max(held_seen[0], int(stack.admin.scard(tenants.held_key("bravo"))))
            time.sleep(0.002)

    threads = [threading.Thread(target=flood), threading.Thread(target=watch)]
    for thread in threads:
        thread.start()
    latencies = []
    try:
        time.sleep(1.0)  # the flood is under way: every slot of bravo's is full
        for i in range(5):
            latencies.append(answered_in_time(honest, "acme", f"during-flood-{i}"))
        assert threads[0].is_alive(), "the flood ended before the honest requests did"
    finally:
        done.set()
        for thread in threads:
            thread.join()
        attacker.close()
        honest.close()
    print(
        f"flood: {sent[0]} junk requests accepted; bravo held at most {held_seen[0]}; "
        f"honest answers in {', '.join(f'{t:.2f}' for t in latencies)} s"
    )
    assert held_seen[0] <= 2
    assert max(latencies) < DEADLINE_SECONDS
    assert_worker_writes_succeed(stack, "flood")


def test_no_tenant_reads_or_takes_another_tenants_answers(stack: Stack) -> None:
    """A shared result stream and shared answer keys let every client read every answer, and a
    client that knew another's request id could take its answer slot by sending first."""
    acme, bravo = stack.client("acme"), stack.client("bravo")
    try:
        submit(bravo, "bravo", text_request("same-id", b"bravo's own words\n"))
        assert tenant_answer(bravo, "bravo", "same-id")["selection"]["text"].endswith(
            "bravo's own words\n"
        )
        # The same id sent by acme afterwards is acme's request, answered with acme's text.
        submit(acme, "acme", text_request("same-id", b"acme's own words\n"))
        assert tenant_answer(acme, "acme", "same-id")["selection"]["text"].endswith(
            "acme's own words\n"
        )
        for command in (
            ("GET", tenants.selection_key("acme", "same-id")),
            ("XRANGE", tenants.result_stream("acme"), "-", "+"),
            ("XREAD", "STREAMS", tenants.result_stream("acme"), "0-0"),
            ("XLEN", tenants.result_stream("acme")),
            ("SET", tenants.slot_key("acme", 0), "{}"),
            ("GET", "airlock:selection:same-id"),
        ):
            refused(bravo, *command)
    finally:
        acme.close()
        bravo.close()


def test_a_connection_without_a_user_can_do_nothing(stack: Stack) -> None:
    """The default user is off: no password alone (the old requirepass way), no anonymous
    connection, and no user's password under another user's name."""
    once = Retry(NoBackoff(), 0)  # a refusal is final: redis-py would retry it with backoff
    port = stack.server.port
    anonymous = Redis(port=port, protocol=2, retry=once)  # RESP2: no HELLO first
    with pytest.raises(AuthenticationError, match="Authentication required"):
        anonymous.get("airlock:selection:acl-1")
    anonymous.close()
    for user, password in (
        (None, WORKER_PASSWORD),
        ("client-acme", WORKER_PASSWORD),
        ("client-acme", CLIENTS["bravo"]),
        ("client-{tenant}", ""),  # the template line itself names a user without a password
    ):
        login = Redis(port=port, username=user, password=password, retry=once)
        with pytest.raises(AuthenticationError, match="invalid username-password pair"):
            login.ping()
        login.close()


#: The attacker, a process of its own (as it would be; and a test process holding 10,000
#: sockets could not run the embedded sandbox it compares answers with): it opens connections
#: as a tenant until Redis refuses one, prints how many it holds and the refusal, and holds
#: them until its stdin closes.
_HOLD_CONNECTIONS = """
import json, socket, sys, time
port, user, password, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
held, refusal, deadline = [], "", time.monotonic() + 120
while len(held) < limit and time.monotonic() < deadline:
    connection = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    connection.sendall(f"AUTH {user} {password}\\r\\n".encode())
    reply = connection.recv(256)
    if not reply.startswith(b"+OK"):
        refusal = reply.decode(errors="replace").strip()
        break
    held.append(connection)
print(json.dumps({"held": len(held), "refusal": refusal}), flush=True)
sys.stdin.read()
"""


def hold_connections(port: int, tenant: str, limit: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _HOLD_CONNECTIONS,
            str(port),
            f"client-{tenant}",
            CLIENTS[tenant],
            str(limit),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_client_holding_every_connection_keeps_out_neither_the_workers_nor_the_bridge(
    tmp_path: Path,
) -> None:
    """9,999 client connections took every slot of the one Redis, and new worker connections
    were refused. The shipped deployments give clients a Redis of their own: a client that
    fills its connection table there reaches nothing of the workers', and the bridge serves
    on through the connections it opened at start."""
    workers_redis = RedisServer(
        tmp_path / "workers-redis",
        None,
        *shipped_redis(tmp_path / "workers-redis", "redis", {}),
        login=ADMIN,
    )
    clients_redis = RedisServer(
        tmp_path / "client-redis", None, *shipped_redis(tmp_path / "client-redis"), login=ADMIN
    )
    workers_redis.start()
    clients_redis.start()
    worker_url = workers_redis.url(login=("worker", WORKER_PASSWORD))
    markers = tmp_path / "markers"
    markers.mkdir()
    workers = WorkerFactory(worker_url, markers, tmp_path)
    bridge = BridgeProcess(
        "b1",
        worker_env(
            worker_url,
            markers,
            {
                "AIRLOCK_BRIDGE_CONSUMER": "b1",
                "AIRLOCK_LOG_FORMAT": "plain",
                "AIRLOCK_CLIENT_REDIS_URL": clients_redis.url(login=("worker", WORKER_PASSWORD)),
            },
        ),
        tmp_path / "bridge.log",
    )
    honest_url = clients_redis.url(login=("client-acme", CLIENTS["acme"]))
    honest = Redis.from_url(honest_url)
    attacker: subprocess.Popen[str] | None = None
    try:
        workers(concurrency=1)
        bridge.wait_ready()
        honest.ping()  # an application's pooled connection, open before the flood
        once = Retry(NoBackoff(), 0)
        # A tenant has no user on the workers' Redis at all.
        with pytest.raises(AuthenticationError):
            Redis(port=workers_redis.port, username="client-bravo",
                  password=CLIENTS["bravo"], retry=once).ping()  # fmt: skip
        admin = clients_redis.client()
        maxclients = int(admin.info("clients")["maxclients"])  # CONFIG is renamed away
        admin.close()
        started = time.monotonic()
        attacker = hold_connections(clients_redis.port, "bravo", maxclients + 100)
        assert attacker.stdout is not None
        flood = json.loads(attacker.stdout.readline())
        print(
            f"bravo held {flood['held']} connections of maxclients {maxclients} in "
            f"{time.monotonic() - started:.1f} s; then: {flood['refusal']}"
        )
        assert "max number of clients reached" in flood["refusal"]
        # What no per-user limit in Redis can stop: other tenants' new connections there.
        with pytest.raises(RedisConnectionError, match="max number of clients"):
            Redis.from_url(honest_url, retry=once).ping()
        # The workers' Redis takes new worker connections, and work flows through it.
        with closing(CeleryQueue(worker_url, worker_url)) as queue:
            refs = [AttachmentRef("w.txt", "text", "text/plain", b"the workers are reachable\n")]
            assert gather(refs, queue, deadline=DEADLINE_SECONDS) == local(refs)
        fresh = Redis.from_url(worker_url)
        assert fresh.lpush("airlock.probe.connections", "{}") == 1 and fresh.delete(
            "airlock.probe.connections"
        )
        fresh.close()
        # An honest client with an open connection is answered while the flood holds.
        during = answered_in_time(honest, "acme", "during-connections")
        assert attacker.stdin is not None
        attacker.stdin.close()
        attacker.wait(30)
        after = Redis.from_url(honest_url)
        took = answered_in_time(after, "acme", "after-connections")
        after.close()
        print(f"honest answers during / after the connection flood: {during:.2f} / {took:.2f} s")
    finally:
        if attacker is not None and attacker.poll() is None:
            attacker.kill()
            attacker.wait(30)
        honest.close()
        bridge.stop()
        workers.stop_all()
        clients_redis.stop()
        workers_redis.stop()
