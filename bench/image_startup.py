"""The image's size and its start-up to the first answered job, as docs/operations.md reports.

Run as root after scripts/image: ``.venv/bin/python bench/image_startup.py [--runs N]``.

- size: what podman stores (uncompressed layers) and the image as a registry would hold it
  (``podman save`` of it, gzip-compressed);
- start-up: a pod as tests/image runs one (the Kubernetes manifests' containers, loopback
  only) with Redis already up; the clock starts when the worker's and the bridge's containers
  are started and stops when the answer to the smoke job (a text PDF, a DOCX, a scanned PDF and
  an image from the corpus), sent at the same moment, is stored. Each run is a new pod.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from tests.conftest import CORPUS_DIR  # noqa: E402
from tests.image import bridge_client  # noqa: E402
from tests.image.conftest import SMOKE_FILES  # noqa: E402
from tests.image.pod import PODMAN, TENANT, Pod, podman  # noqa: E402
from tests.image.test_image import BOTH_QUEUES  # noqa: E402

IMAGE = "localhost/airlock:0.1.0"


def sizes() -> tuple[float, float]:
    """(stored MB, gzip-compressed MB) of the image."""
    stored = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    save = subprocess.Popen([str(PODMAN), "save", "--format", "docker-archive", IMAGE],
                            stdout=subprocess.PIPE)  # fmt: skip
    gzip = subprocess.run(["gzip", "-c"], stdin=save.stdout, capture_output=True, check=True)
    save.wait()
    return stored / 1e6, len(gzip.stdout) / 1e6


def first_answer_seconds() -> float:
    pod = Pod()
    try:
        pod.start_redis()
        client = pod.client()
        document = bridge_client.request("first", [CORPUS_DIR / name for name in SMOKE_FILES])
        started = time.monotonic()
        pod.start(pod.workload("airlock-ocr-worker"), "worker", args=BOTH_QUEUES)
        pod.start(pod.workload("airlock-bridge"), "bridge")
        bridge_client.send(client, TENANT, document)
        answer = bridge_client.answer(client, TENANT, "first", 300)
        elapsed = time.monotonic() - started
        assert answer is not None and answer["selection"]["dropped"] == [], answer
        return elapsed
    finally:
        pod.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    stored, compressed = sizes()
    print(f"image {IMAGE}: {stored:.0f} MB stored, {compressed:.0f} MB gzip-compressed")
    seconds = [first_answer_seconds() for _ in range(runs)]
    print(
        f"start-up to the first answered job: median {statistics.median(seconds):.1f} s "
        f"(runs: {', '.join(f'{s:.1f}' for s in seconds)})"
    )


if __name__ == "__main__":
    main()
