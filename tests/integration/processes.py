"""``airlock bridge`` and ``airlock health`` run as processes by the integration tests, with the
Redis streams the bridge reads and writes (docs/bridge-service.md).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, cast

from redis import Redis

from bridge.knowledge.attachments import AttachmentRef
from bridge.service import tenants
from bridge.service.config import ServiceConfig
from tests.conftest import REPO_ROOT
from tests.integration.conftest import AIRLOCK

STREAMS = ServiceConfig(consumer="")
_READY_SECONDS = 30.0
ANSWER_SECONDS = 60.0


class BridgeProcess:
    """One ``airlock bridge`` in a process group of its own, logging to a file."""

    def __init__(self, consumer: str, env: dict[str, str], log_path: Path) -> None:
        self.consumer = consumer
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(AIRLOCK), "bridge"],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        ready = f"consumer {self.consumer} of group {STREAMS.group} reading"
        deadline = time.monotonic() + _READY_SECONDS
        while ready not in self.log():
            assert self.process.poll() is None, f"the bridge exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"the bridge did not start:\n{self.log()}"
            time.sleep(0.05)

    def kill_9(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill_9()


def attachment(ref: AttachmentRef) -> dict[str, str]:
    return {
        "label": ref.label,
        "kind": ref.kind,
        "media_type": ref.media_type,
        "payload_b64": base64.b64encode(ref.payload).decode(),
    }


def send(redis: Redis, document: object) -> str:
    untrusted_raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    return cast(bytes, redis.xadd(STREAMS.request_stream, {"request": untrusted_raw})).decode()


def request(request_id: str, *refs: AttachmentRef, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "request_id": request_id, "attachments": [attachment(r) for r in refs], **extra}


def results(redis: Redis) -> list[dict[str, Any]]:
    entries: Any = redis.xrange(STREAMS.result_stream)  # bytes replies; redis-py types both modes
    return [json.loads(fields[b"result"]) for _, fields in entries]


def wait_for_answers(redis: Redis, count: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + ANSWER_SECONDS
    while redis.xlen(STREAMS.result_stream) < count:
        assert time.monotonic() < deadline, f"{redis.xlen(STREAMS.result_stream)} answers"
        time.sleep(0.05)
    return {answer["request_id"]: answer for answer in results(redis)}


def submit(redis: Redis, tenant: str, document: object) -> int:
    """Submit as a client does: ``SET … NX`` into the first of the tenant's free inbox slots,
    waiting for one while all are taken; returns the slot."""
    untrusted_raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    deadline = time.monotonic() + ANSWER_SECONDS
    while True:
        for slot in range(tenants.SLOTS):
            if redis.set(tenants.slot_key(tenant, slot), untrusted_raw, nx=True):
                return slot
        assert time.monotonic() < deadline, f"every slot of {tenant} stayed taken"
        time.sleep(0.01)


def tenant_answer(
    redis: Redis, tenant: str, request_id: str, timeout: float = ANSWER_SECONDS
) -> dict[str, Any]:
    """The answer the tenant reads from its own key, polled until it is there."""
    deadline = time.monotonic() + timeout
    key = tenants.selection_key(tenant, request_id)
    while (stored := redis.get(key)) is None:
        assert time.monotonic() < deadline, f"no answer to {tenant}/{request_id} in {timeout} s"
        time.sleep(0.01)
    answer: dict[str, Any] = json.loads(stored)
    return answer


def health(*arguments: str, env: dict[str, str]) -> int:
    """``airlock health``'s exit code; what it said is printed, so a failed assertion on the
    code shows why (pytest shows a failed test's output)."""
    probe = subprocess.run(
        [str(AIRLOCK), "health", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    print(
        f"airlock health {' '.join(arguments)}: exit {probe.returncode}", probe.stdout, probe.stderr
    )
    return probe.returncode
