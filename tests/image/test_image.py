"""The image built from the Dockerfile, run the way deploy/kubernetes runs it: the sandbox's
own check passes with the image's environment, extraction gives what the embedded path gives,
and a pod of Redis, a worker and the bridge answers a job and loses none when the worker is
stopped in the middle of one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.deploy.conftest import by_kind
from tests.image import bridge_client
from tests.image.conftest import SMOKE_FILES, as_streamed, embedded_selection
from tests.image.pod import TENANT, Pod, podman, wait_until
from tests.image_builders import (
    TRADITIONAL_CHINESE,
    VERTICAL_JAPANESE,
    cjk_lines,
    vertical_columns,
)

pytestmark = [pytest.mark.image, pytest.mark.slow, pytest.mark.timeout(1800)]

#: The layers every deployment requires (the image's AIRLOCK_SANDBOX_REQUIRE).
REQUIRED = ["landlock", "no_new_privs", "rlimits", "seccomp"]
#: One worker takes both stages' jobs: two in one pod would share its network namespace and
#: both bind the metrics port. Everything else is the OCR worker's manifest.
BOTH_QUEUES = ["worker", "-Q", "airlock.light,airlock.ocr,airlock.pages"]
_ANSWER_SECONDS = 300.0


def run(image: str, hardened: tuple[str, ...], *args: str, extra: tuple[str, ...] = ()) -> Any:
    return podman("run", "--rm", "--network", "none", "--no-healthcheck", *hardened, *extra,
                  image, *args, check=False, timeout=600)  # fmt: skip


def test_doctor_passes_with_the_images_own_environment(
    image: str, hardened: tuple[str, ...]
) -> None:
    result = run(image, hardened, "doctor", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["required"] == REQUIRED
    assert report["missing_required"] == []
    assert set(REQUIRED) <= set(report["active"])
    # What an unprivileged container cannot have (docs/operations.md#sandbox-inside-a-container).
    assert report["missing"] == ["netns", "uid_drop"]
    assert report["tcp_blocked"], report["tcp_outcome"]
    assert "eng" in report["tesseract"]["languages"]


def test_extract_in_the_container_gives_the_embedded_selection(
    image: str, hardened: tuple[str, ...], corpus_dir: Path, embedded: dict[str, Any]
) -> None:
    files = [f"/in/{name}" for name in SMOKE_FILES]
    result = run(image, hardened, "extract", "--json", *files,
                 extra=("-v", f"{corpus_dir}:/in:ro"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == embedded
    for name in SMOKE_FILES:
        assert f"ATTACHMENT [{name}]" in embedded["text"]


def test_the_default_image_reads_chinese_and_vertical_japanese(
    image: str, hardened: tuple[str, ...], tmp_path: Path
) -> None:
    """Issue 25: a Traditional Chinese screenshot and a vertical Japanese page were refused as
    "not text in the OCR language (eng)"; the image's default reads them."""
    (tmp_path / "taiwan.png").write_bytes(cjk_lines(TRADITIONAL_CHINESE))
    (tmp_path / "tategaki.png").write_bytes(vertical_columns(VERTICAL_JAPANESE))
    tmp_path.chmod(0o755)
    result = run(image, hardened, "extract", "--json", "/in/taiwan.png", "/in/tategaki.png",
                 extra=("-v", f"{tmp_path}:/in:ro"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    selection = json.loads(result.stdout)
    assert not selection["dropped"], selection["dropped"]
    assert "國立圖書館收藏了許多珍貴的古籍與檔案" in selection["text"]
    assert "夏ノ暑サニモマケヌ" in selection["text"]


@pytest.fixture(scope="module")
def worker(pod: Pod) -> str:
    spec = pod.workload("airlock-ocr-worker")
    name = pod.start(spec, "worker", args=BOTH_QUEUES)
    pod.wait_ready(name, spec)
    return name


@pytest.fixture(scope="module")
def bridge(pod: Pod) -> str:
    spec = pod.workload("airlock-bridge")
    name = pod.start(spec, "bridge")
    pod.wait_ready(name, spec)
    return name


def task_log_lines(log: str) -> list[dict[str, Any]]:
    """The JSON lines the worker writes for each finished task (docs/operations.md#logs)."""
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == "worker.tasks"]


def test_a_job_through_the_bridge_and_a_worker_in_a_pod(
    pod: Pod, worker: str, bridge: str, corpus_dir: Path, embedded: dict[str, Any]
) -> None:
    client = pod.client()  # an application: Redis user `client-smoke`, the workers `worker`
    bridge_client.send(
        client, TENANT, bridge_client.request("smoke", [corpus_dir / name for name in SMOKE_FILES])
    )
    answer = bridge_client.answer(client, TENANT, "smoke", _ANSWER_SECONDS)
    assert answer is not None, pod.logs(bridge)[-3000:]
    assert answer["selection"] == as_streamed(embedded)
    # Every probe of the manifests passes in the containers they are written for.
    for container, name in ((worker, "airlock-ocr-worker"), (bridge, "airlock-bridge")):
        spec = pod.workload(name)
        for probe in (spec.readiness, spec.liveness):
            result = pod.probe(container, probe)
            assert result.returncode == 0, f"{container} {probe}: {result.stderr}"
    statefulsets = by_kind(pod.resources, "StatefulSet")
    for server, container in (("airlock-redis", "redis"), ("airlock-client-redis", "client-redis")):
        (redis,) = statefulsets[server]["spec"]["template"]["spec"]["containers"]
        for kind in ("readinessProbe", "livenessProbe"):
            result = pod.probe(f"{pod.name}-{container}", redis[kind]["exec"]["command"])
            assert result.returncode == 0, f"{server} {kind}: {result.stdout}{result.stderr}"
    # The worker logs the line operators follow a request by, one per finished task.
    logged = task_log_lines(pod.logs(worker))
    assert {line["label"] for line in logged} >= set(SMOKE_FILES), logged
    assert {line["outcome"] for line in logged} <= {"admitted", "handed_on"}


def three_page_scan(corpus_dir: Path, directory: Path) -> Path:
    """A three-page TIFF of the corpus's 300 dpi letter page: seconds of OCR per page."""
    page = Image.open(corpus_dir / "tesseract_unlv_8087_054.3B.tif")
    path = directory / "three-pages.tif"
    page.save(path, save_all=True, append_images=[page, page])
    return path


def progress(redis: Any) -> list[dict[str, Any]]:
    """The PROGRESS states tasks published (pages done / total) in the result backend."""
    states = [json.loads(redis.get(key) or b"{}") for key in redis.scan_iter("celery-task-meta-*")]
    return [state["result"] for state in states if state.get("status") == "PROGRESS"]


@pytest.fixture
def restarted_worker(pod: Pod) -> Iterator[list[str]]:
    started: list[str] = []
    yield started
    for name in started:
        podman("rm", "--force", "--time", "0", name, check=False)


def _ocr_jobs(redis: Any) -> int:
    """OCR jobs queued or held by a worker (kombu keeps a delivered message in ``unacked``)."""
    held = [json.loads(entry) for entry in redis.hvals("unacked")]
    return int(redis.llen("airlock.ocr")) + sum(1 for _, _, queue in held if queue == "airlock.ocr")


def test_sigterm_of_the_worker_mid_job_loses_nothing(
    pod: Pod,
    worker: str,
    bridge: str,
    corpus_dir: Path,
    tmp_path: Path,
    restarted_worker: list[str],
) -> None:
    """A rollout stops a worker with SIGTERM: it finishes the job it runs (Celery's warm
    shutdown), and the OCR job waiting behind it, held by the worker for its next free
    process, goes back to Redis for the next worker. Small jobs meanwhile take the worker's
    light lane instead of waiting behind the OCR."""
    redis, client = pod.redis(), pod.client()
    scan = three_page_scan(corpus_dir, tmp_path)
    bridge_client.send(client, TENANT, bridge_client.request("long", [scan]))
    wait_until(
        lambda: any(0 < state["done"] < state["total"] for state in progress(redis)),
        lambda: f"the three-page job never ran:\n{pod.logs(worker)[-3000:]}",
    )
    short = tmp_path / "short.txt"
    short.write_text("beside the long job\n")
    bridge_client.send(client, TENANT, bridge_client.request("short", [short]))
    beside = bridge_client.answer(client, TENANT, "short", _ANSWER_SECONDS)
    assert beside is not None, pod.logs(worker)[-3000:]
    assert beside["selection"]["text"] == "ATTACHMENT [short.txt]\nbeside the long job\n"
    assert bridge_client.answer(client, TENANT, "long", 0) is None, "the small job waited"

    bridge_client.send(client, TENANT, bridge_client.request("queued", [scan]))
    wait_until(lambda: _ocr_jobs(redis) == 2, lambda: "the second OCR job never reached Redis")

    podman("kill", "--signal", "TERM", worker)
    exit_code = podman("wait", worker, timeout=300).stdout.strip()
    assert exit_code == "0", pod.logs(worker)[-3000:]
    long = bridge_client.answer(client, TENANT, "long", _ANSWER_SECONDS)
    assert long is not None, pod.logs(bridge)[-3000:]
    assert long["selection"] == as_streamed(embedded_selection([scan]))
    assert bridge_client.answer(client, TENANT, "queued", 0) is None, pod.logs(worker)[-3000:]
    assert redis.llen("airlock.ocr") == 1 and redis.hlen("unacked") == 0

    spec = pod.workload("airlock-ocr-worker")
    restarted_worker.append(pod.start(spec, "worker-2", args=BOTH_QUEUES))
    queued = bridge_client.answer(client, TENANT, "queued", _ANSWER_SECONDS)
    assert queued is not None, pod.logs(restarted_worker[0])[-3000:]
    assert queued["selection"] == as_streamed(embedded_selection([scan]))
    # Nothing left: every request answered once, none pending, no task waiting.
    streams = pod.clients_redis()  # the request stream lives beside the clients' slots
    assert streams.xlen(bridge_client.REQUEST_STREAM) == 0
    assert streams.xpending(bridge_client.REQUEST_STREAM, "airlock-bridge")["pending"] == 0
    assert redis.llen("airlock.light") == redis.llen("airlock.ocr") == 0
