"""A client of the bridge service, as an application runs one: one request into a free inbox
slot of its tenant, then its answer from ``airlock:tenant:<tenant>:selection:<request_id>``
(docs/bridge-service.md).

The image tests use it from the host (through a Unix socket of the clients' Redis container)
and, run as ``python bridge_client.py URL TENANT REQUEST_ID FILE...`` with the image's
interpreter, from a container on the network applications use. So it needs only the standard
library and redis-py (not airlock: the key names are spelled out, as a client in another
language would), and prints the answer document as JSON.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

from redis import Redis

REQUEST_STREAM = "airlock:requests"
#: users.conf grants each tenant ``airlock:tenant:<tenant>:in:[0-7]``.
SLOTS = 8
#: Long enough for a page of OCR on a busy machine, short of the bridge's 600 s maximum.
DEADLINE_SECONDS = 240
_KINDS = {
    ".pdf": ("pdf", "application/pdf"),
    ".docx": (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ".tif": ("image", "image/tiff"),
    ".png": ("image", "image/png"),
    ".jpg": ("image", "image/jpeg"),
    ".txt": ("text", "text/plain"),
}


def request(request_id: str, paths: list[Path]) -> dict[str, Any]:
    """The request for ``paths``, inline, labelled with their names."""
    attachments = []
    for path in paths:
        kind, media_type = _KINDS[path.suffix]
        attachments.append(
            {
                "label": path.name,
                "kind": kind,
                "media_type": media_type,
                "payload_b64": base64.b64encode(path.read_bytes()).decode(),
            }
        )
    return {
        "v": 1,
        "request_id": request_id,
        "attachments": attachments,
        "deadline_seconds": DEADLINE_SECONDS,
    }


def send(redis: Redis, tenant: str, document: dict[str, Any]) -> None:
    """``SET … NX`` into the first free slot, waiting while the bridge has all eight."""
    raw = json.dumps(document)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        for slot in range(SLOTS):
            if redis.set(f"airlock:tenant:{tenant}:in:{slot}", raw, nx=True):
                return
        time.sleep(0.1)
    raise TimeoutError(f"every inbox slot of {tenant} stayed taken")


def answer(redis: Redis, tenant: str, request_id: str, timeout: float) -> dict[str, Any] | None:
    """The answer stored for ``request_id``, or None if none came within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stored = redis.get(f"airlock:tenant:{tenant}:selection:{request_id}")
        if stored is not None:
            document: dict[str, Any] = json.loads(stored)
            return document
        time.sleep(0.1)
    return None


def main(argv: list[str]) -> int:
    url, tenant, request_id, *files = argv
    redis = Redis.from_url(url, socket_timeout=10)
    send(redis, tenant, request(request_id, [Path(name) for name in files]))
    document = answer(redis, tenant, request_id, DEADLINE_SECONDS + 30)
    if document is None:
        print(f"no answer to {request_id}", file=sys.stderr)
        return 1
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
