"""``airlock bridge`` as a process: real Redis streams, real Celery workers, real crashes.

Every test talks to the default stream names (the ones docs/bridge-service.md uses), which are
emptied before and after it. Slow requests carry the test hooks' ``sleep`` directive
(tests/integration/worker_hooks.py), so a test can act while one is being extracted.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.knowledge.kinds import guess_kind
from bridge.knowledge.pages import selection_pages
from bridge.queue.claim_check import sha256_hex, store_payloads
from bridge.service import tenants
from tests.bridge.service.schema_check import RESULT_SCHEMA, schema_errors
from tests.conftest import REPO_ROOT
from tests.deploy.conftest import REDIS_USERS
from tests.helpers import selection_as_json
from tests.integration.conftest import (
    AIRLOCK,
    WorkerProcess,
    wait_for_marker,
    worker_env,
)
from tests.integration.processes import (
    ANSWER_SECONDS,
    STREAMS,
    BridgeProcess,
    attachment,
    request,
    results,
    send,
    submit,
    tenant_answer,
    wait_for_answers,
)
from tests.integration.refs import hostile_refs, local_selection, slow_ref
from tests.metrics_scrape import free_port, scrape
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis]

DOC = REPO_ROOT / "docs" / "bridge-service.md"
#: A text file, a PDF with a text layer and a DOCX: the light queue, no OCR, seconds in all.
CORPUS_FILES = (
    "docling_word_sample.expected.txt",
    "pypdf-samples_habibi-arabic.pdf",
    "docling_word_sample.docx",
)


@pytest.fixture
def start_bridge(
    redis_url: str, shared_worker: WorkerProcess, tmp_path: Path
) -> Iterator[Callable[..., BridgeProcess]]:
    """``start_bridge(consumer, **env)``: a bridge against the test database, ready on return."""
    started: list[BridgeProcess] = []

    def start(consumer: str = "b1", **env: str) -> BridgeProcess:
        overrides = {
            "AIRLOCK_BRIDGE_CONSUMER": consumer,
            "AIRLOCK_LOG_FORMAT": "plain",
            "AIRLOCK_METRICS_PORT": "0",  # bridges started side by side need no port
            **env,
        }
        bridge = BridgeProcess(
            consumer,
            worker_env(redis_url, shared_marker_dir(shared_worker), overrides),
            tmp_path / f"bridge-{consumer}-{len(started)}.log",
        )
        started.append(bridge)
        bridge.wait_ready()
        return bridge

    yield start
    for bridge in started:
        bridge.stop()


def shared_marker_dir(worker: WorkerProcess) -> Path:
    """Where the shared worker's hooks record their pids: the directory of its log."""
    return worker.log_path.parent


@pytest.fixture(autouse=True)
def empty_streams(redis: Redis) -> Iterator[None]:
    def empty() -> None:
        keys = [STREAMS.request_stream, STREAMS.result_stream, STREAMS.dead_letter_stream]
        answers = [*redis.scan_iter(match="airlock:selection:*")]
        redis.delete(*keys, *answers, *redis.scan_iter(match="airlock:tenant:*"))

    empty()
    yield
    empty()


def settled(redis: Redis) -> bool:
    pending = redis.xpending(STREAMS.request_stream, STREAMS.group)["pending"]
    return redis.xlen(STREAMS.request_stream) == 0 and pending == 0


def corpus_refs(corpus_dir: Path) -> list[AttachmentRef]:
    refs = []
    for name in CORPUS_FILES:
        payload = (corpus_dir / name).read_bytes()
        refs.append(AttachmentRef(name, *guess_kind(name, payload[:16]), payload))
    return refs


def test_requests_sent_while_the_bridge_is_down_equal_the_local_selection_byte_for_byte(
    redis: Redis, start_bridge: Callable[..., BridgeProcess], corpus_dir: Path
) -> None:
    refs = corpus_refs(corpus_dir) + hostile_refs()
    limits = ExtractionLimits(max_text_chars=6_000, max_total_chars=9_000)
    send(redis, request("inline", *refs, limits=asdict(limits), deadline_seconds=120))
    # The same files as claim checks, stored the way gather stores them.
    store_payloads(redis, {sha256_hex(r.payload): r.payload for r in refs if r.payload}, 600)
    checks = [
        {
            "label": r.label,
            "kind": r.kind,
            "media_type": r.media_type,
            "sha256": sha256_hex(r.payload),
        }
        for r in refs
        if r.payload
    ]
    send(redis, {"v": 1, "request_id": "claimed", "attachments": checks, "pages": True})
    start_bridge()
    answers = wait_for_answers(redis, 2)
    assert answers["inline"]["selection"] == selection_as_json(local_selection(refs, limits))
    stored_refs = [r for r in refs if r.payload]
    claimed = local_selection(stored_refs, ExtractionLimits())
    # Asked for, the page map rides beside the spec's fields, as selection_pages reads it.
    page_map = [
        {"label": block.label, "pages": [asdict(span) for span in block.pages]}
        for block in selection_pages(claimed.text)
    ]
    assert any(block["pages"] for block in page_map)
    assert answers["claimed"]["selection"] == {**selection_as_json(claimed), "pages": page_map}
    for name in CORPUS_FILES:
        assert f"ATTACHMENT [{name}]" in answers["inline"]["selection"]["text"]
    assert json.loads(redis.get("airlock:selection:inline") or b"") == answers["inline"]
    assert schema_errors(RESULT_SCHEMA, list(answers.values())) == [[], []]
    assert settled(redis)


@pytest.mark.parametrize("restart", ["same consumer", "another consumer"])
@pytest.mark.slow
def test_a_bridge_killed_mid_request_loses_nothing_and_answers_once(
    redis: Redis,
    start_bridge: Callable[..., BridgeProcess],
    shared_worker: WorkerProcess,
    restart: str,
) -> None:
    tag = f"bridgekill{restart.split(maxsplit=1)[0]}"
    (marker := shared_marker_dir(shared_worker) / tag).unlink(missing_ok=True)
    slow = slow_ref(tag)
    quick = AttachmentRef("quick.txt", "text", "text/plain", b"quick")
    first = start_bridge("b1", AIRLOCK_BRIDGE_CLAIM_IDLE="3")
    send(redis, request("before", quick))
    send(redis, request("slow", slow, deadline_seconds=60))
    send(redis, request("after", quick))
    wait_for_marker(marker)  # a worker is extracting the slow request for the first bridge
    first.kill_9()
    killed_at = time.monotonic()
    if restart == "same consumer":
        # A claim idle time of ten minutes: only its own pending list can bring the slow
        # request back this quickly.
        start_bridge("b1", AIRLOCK_BRIDGE_CLAIM_IDLE="600")
    else:
        start_bridge("b2", AIRLOCK_BRIDGE_CLAIM_IDLE="3")
    answers = wait_for_answers(redis, 3)
    answered_at = time.monotonic()
    assert answers["slow"]["selection"] == selection_as_json(
        local_selection([slow], ExtractionLimits())
    )
    assert answers["before"]["selection"]["text"] == answers["after"]["selection"]["text"]
    # Exactly one result per request id, and nothing left pending.
    time.sleep(1)
    assert sorted(answer["request_id"] for answer in results(redis)) == ["after", "before", "slow"]
    assert settled(redis)
    if restart == "another consumer":
        # It waited for the dead bridge's lease to lapse (renewed every second until the kill).
        assert answered_at - killed_at >= 2


def test_malformed_requests_are_answered_or_dead_lettered_and_do_not_block(
    redis: Redis, start_bridge: Callable[..., BridgeProcess]
) -> None:
    good = AttachmentRef("good.txt", "text", "text/plain", b"still served")
    dead = [
        send(redis, b"{not json"),
        send(redis, request("bad id!", good)),
        send(redis, request("huge", AttachmentRef("big.txt", "text", "", b"x" * 1_200_000))),
        cast(bytes, redis.xadd(STREAMS.request_stream, {"payload": "no request field"})).decode(),
    ]
    send(redis, {**request("types", good), "deadline_seconds": "soon"})
    send(redis, {**request("unknown", good), "priority": "high"})
    send(redis, request("b64", good) | {"attachments": [{**attachment(good), "payload_b64": "%%"}]})
    send(redis, request("good", good))
    port = free_port()
    start_bridge(AIRLOCK_BRIDGE_MAX_REQUEST_MB="1", AIRLOCK_METRICS_PORT=str(port))
    answers = wait_for_answers(redis, 4)
    deadline = time.monotonic() + ANSWER_SECONDS
    while redis.xlen(STREAMS.dead_letter_stream) < len(dead):
        assert time.monotonic() < deadline, "the dead letters were not all written"
        time.sleep(0.05)
    assert answers["good"]["selection"]["text"] == "ATTACHMENT [good.txt]\nstill served"
    for request_id, words in (("types", "deadline"), ("unknown", "nothing else"), ("b64", "64")):
        assert answers[request_id]["error"]["type"] == "InvalidRequest"
        assert words in answers[request_id]["error"]["reason"]
    dead_letters: Any = redis.xrange(STREAMS.dead_letter_stream)
    letters = {f[b"entry_id"].decode(): f[b"reason"].decode() for _, f in dead_letters}
    assert sorted(letters) == sorted(dead)
    # Over the cap: measured inside Redis and dead-lettered unread (bridge.service.streams).
    assert "over the request cap of 1049600 bytes" in letters[dead[2]]
    assert schema_errors(RESULT_SCHEMA, list(answers.values())) == [[] for _ in answers]
    assert settled(redis)
    # The bridge's own endpoint counts each settled entry under its outcome.
    samples = scrape(port)
    requests = "airlock_bridge_requests_total"
    assert samples[(requests, frozenset({("outcome", "selection")}))] == 1
    assert samples[(requests, frozenset({("outcome", "InvalidRequest")}))] == 3
    assert samples[(requests, frozenset({("outcome", "dead_letter")}))] == len(dead)
    assert samples[("airlock_bridge_request_seconds_count", frozenset())] == 4
    assert ("airlock_queue_depth", frozenset({("queue", "airlock.light")})) in samples


def test_sigterm_finishes_the_request_in_flight_then_exits_0(
    redis: Redis, start_bridge: Callable[..., BridgeProcess], shared_worker: WorkerProcess
) -> None:
    (marker := shared_marker_dir(shared_worker) / "bridgeterm").unlink(missing_ok=True)
    slow = slow_ref("bridgeterm")
    bridge = start_bridge()
    send(redis, request("slow", slow, deadline_seconds=60))
    wait_for_marker(marker)
    bridge.process.send_signal(signal.SIGTERM)
    assert bridge.process.wait(30) == 0, bridge.log()
    assert [answer["request_id"] for answer in results(redis)] == ["slow"]
    assert results(redis)[0]["selection"] == selection_as_json(
        local_selection([slow], ExtractionLimits())
    )
    assert settled(redis)


@pytest.fixture
def tenant(redis: Redis) -> Iterator[tuple[str, str]]:
    """A client tenant ``acme`` on the test Redis, with the rules of the users.conf template,
    as the start scripts write them; its name and password."""
    (template,) = [
        line for line in REDIS_USERS.read_text().splitlines() if line.startswith("user client-")
    ]
    rules = template.replace("{tenant}", "acme").split()[2:]
    password = "ac" * 16
    redis.execute_command("ACL", "SETUSER", "client-acme", "reset", *rules, f">{password}")  # type: ignore[no-untyped-call]
    yield "acme", password
    redis.acl_deluser("client-acme")


def test_the_documented_redis_cli_example_works_as_written(
    redis: Redis,
    integration_redis: RedisServer,
    tenant: tuple[str, str],
    start_bridge: Callable[..., BridgeProcess],
) -> None:
    """The ``sh`` block of docs/bridge-service.md, run as the tenant's Redis user against the
    suite's Redis, prints the result its ``text`` block shows: once read from the stream, once
    from the key."""
    doc = DOC.read_text()
    (example,) = re.findall(r"```sh\n(.*?)```", doc, flags=re.DOTALL)
    (shown,) = re.findall(r"```text\n(.*?)\n```", doc, flags=re.DOTALL)
    start_bridge()
    url = integration_redis.url(login=(f"client-{tenant[0]}", tenant[1]))
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", example.replace("redis-cli ", f"redis-cli -u {url} ")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    stored_ok, stream, entry_id, field, streamed, stored = run.stdout.splitlines()
    assert stored_ok == "OK"
    assert (stream, field) == (tenants.result_stream(tenant[0]), "result")
    assert re.fullmatch(r"\d+-\d+", entry_id)
    assert streamed == stored == shown


def test_a_quota_held_by_entries_that_are_gone_does_not_block_a_tenant(
    redis: Redis, tenant: tuple[str, str], start_bridge: Callable[..., BridgeProcess]
) -> None:
    """A settle that never released its quota (an entry XAUTOCLAIM dropped, one deleted by
    hand) would keep the tenant at its quota for ever: such ids are found and released when the
    tenant reaches it."""
    name = tenant[0]
    start_bridge()
    first = AttachmentRef("first.txt", "text", "text/plain", b"first")
    submit(redis, name, request("first", first))
    assert tenant_answer(redis, name, "first")["selection"]["text"].endswith("first")
    # Ids older than anything the group delivered, and not pending: settled long ago.
    redis.sadd(tenants.held_key(name), "1-1", "1-2", "1-3")
    second = AttachmentRef("second.txt", "text", "text/plain", b"second")
    submit(redis, name, request("second", second))
    assert tenant_answer(redis, name, "second")["selection"]["text"].endswith("second")
    assert redis.scard(tenants.held_key(name)) == 0
    assert settled(redis)


def test_an_unreachable_redis_exits_3(tmp_path: Path) -> None:
    env = worker_env("redis://127.0.0.1:1/0", tmp_path, {})
    run = subprocess.run(
        [str(AIRLOCK), "bridge"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 3, run.stderr
    assert "unreachable" in run.stderr


def peak_memory_bytes(pid: int) -> int:
    """The process's peak resident memory (VmHWM): what an entry read into it would raise."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_a_200_mb_entry_is_dead_lettered_unread_and_the_bridge_goes_on(
    redis: Redis, start_bridge: Callable[..., BridgeProcess]
) -> None:
    """One entry far over the request cap (here in several fields, which no per-value limit
    such as proto-max-bulk-len catches) used to be loaded whole by XREADGROUP, crash-looping
    every bridge that read it. It is measured inside Redis and dead-lettered unread."""
    bridge = start_bridge()
    before = peak_memory_bytes(bridge.process.pid)
    chunk = b"A" * (40 * 1024 * 1024)
    entry_id = cast(
        bytes, redis.xadd(STREAMS.request_stream, {f"request{i}".encode(): chunk for i in range(5)})
    ).decode()
    del chunk
    ref = AttachmentRef("after.txt", "text", "text/plain", b"served after the giant entry")
    send(redis, request("after-giant", ref))
    answers = wait_for_answers(redis, 1)
    assert answers["after-giant"]["selection"] == selection_as_json(
        local_selection([ref], ExtractionLimits())
    )
    deadline = time.monotonic() + ANSWER_SECONDS
    while redis.xlen(STREAMS.dead_letter_stream) < 1:
        assert time.monotonic() < deadline, bridge.log()
        time.sleep(0.05)
    dead_letters: Any = redis.xrange(STREAMS.dead_letter_stream)
    [(_, fields)] = dead_letters
    assert fields[b"entry_id"].decode() == entry_id
    assert b"over the request cap" in fields[b"reason"]
    assert redis.xlen(STREAMS.request_stream) == 0  # deleted, not left to be read again
    assert bridge.process.poll() is None
    grown = peak_memory_bytes(bridge.process.pid) - before
    assert grown < 200 * 1024 * 1024 / 10, f"the bridge's peak memory grew {grown} bytes"


def test_a_bridge_whose_user_may_not_list_users_says_so_and_serves_the_stream(
    redis: Redis,
    integration_redis: RedisServer,
    shared_worker: WorkerProcess,
    tmp_path: Path,
) -> None:
    """A Redis user without ACL USERS (an older users.conf, a managed Redis) must not stop the
    bridge: it serves the request stream's own entries and says, once, that no tenant is."""
    redis.execute_command(
        "ACL", "SETUSER", "no-acl", "reset", "on", ">n0acl", "~*", "&*", "+@all", "-acl"
    )  # type: ignore[no-untyped-call]
    url = integration_redis.url(login=("no-acl", "n0acl"))
    env = {"AIRLOCK_BRIDGE_CONSUMER": "b-no-acl", "AIRLOCK_LOG_FORMAT": "plain"}
    bridge = BridgeProcess(
        "b-no-acl", worker_env(url, shared_marker_dir(shared_worker), env), tmp_path / "b.log"
    )
    try:
        bridge.wait_ready()
        ref = AttachmentRef("stream.txt", "text", "text/plain", b"through the stream")
        send(redis, request("no-acl", ref))
        assert wait_for_answers(redis, 1)["no-acl"]["selection"]["text"].endswith("the stream")
        assert bridge.log().count("no client tenant is served") == 1
    finally:
        bridge.stop()
        redis.acl_deluser("no-acl")
