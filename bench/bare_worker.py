"""The floor under the queue's cost: a bare Celery app running the same sandbox (bench only).

``celery -A bare_worker worker`` with the repository and bench/ on ``PYTHONPATH`` (as
bench/workers.py starts it), against ``BENCH_BROKER_URL``. One task reads a
small text attachment in the sandbox and returns its text, with the airlock worker's delivery
settings (late acknowledgement, one message prefetched per pool process, JSON, a Redis result
backend) and none of its own work: no claim check, admission, delivery count, result cache,
withdrawal mark or envelope. What airlock's queue costs beyond this is airlock's.
"""

from __future__ import annotations

import os

from celery import Celery

from bridge.knowledge.attachments import AttachmentRef, extract_attachment
from sandbox.extractor import SandboxExtractor

app = Celery("bare", broker=os.environ["BENCH_BROKER_URL"], backend=os.environ["BENCH_BROKER_URL"])
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
)
_extractor = SandboxExtractor()


@app.task(name="bench.bare_extract")
def bare_extract(label: str, text: str) -> str:
    ref = AttachmentRef(label, "text", "text/plain", text.encode())
    return extract_attachment(ref, _extractor).text
