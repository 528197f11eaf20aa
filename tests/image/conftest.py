"""The image, built from the repository's Dockerfile by scripts/image, and the Redis stand-in.

These tests need root (podman's storage and networks are the host's). Without root, or on a
host where podman cannot run a container, they are skipped with the reason, except in CI
(``CI=true``), where a missing prerequisite fails them: CI must never pass by not running them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.image.pod import PODMAN, REPO, Pod, manifests, podman, workload

#: Cold: installing podman and mmdebstrap, making the Debian base, a full build.
_BUILD_SECONDS = 1800
_BASE = "localhost/debian:bookworm-slim"
#: What deploy/compose.yaml and deploy/kubernetes name; built locally from Debian's package.
REDIS_IMAGE = "localhost/redis:7.2-bookworm"
HERE = Path(__file__).resolve().parent
#: The smoke job: a PDF with a text layer, a DOCX, a scanned PDF (light stage, then OCR) and an
#: image (OCR), from the real corpus.
SMOKE_FILES = (
    "docling_2305.03393v1-pg9.pdf",
    "docling_word_sample.docx",
    "docling_ocr_test-scanned.pdf",
    "tesseract_phototest.tif",
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the image tests must run in CI)")
    pytest.skip(reason)


def _podman_cannot_run_containers() -> str | None:
    """Why podman cannot run a container here, or None when it can."""
    try:
        info = subprocess.run(
            [str(PODMAN), "info"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as exc:
        return f"podman is not usable: {exc}"
    if info.returncode != 0:
        return f"podman info failed: {info.stderr.strip()[-2000:]}"
    if podman("image", "exists", _BASE, check=False).returncode == 0:
        run = podman("run", "--rm", "--network", "none", _BASE, "true", check=False)
        if run.returncode != 0:
            return f"podman cannot run a container: {run.stderr.strip()[-2000:]}"
    return None


@pytest.fixture(scope="session")
def image() -> str:
    """The image's name, built (or found up to date) by scripts/image."""
    if os.geteuid() != 0:
        _unavailable("the image tests need root: podman's storage and networks are the host's")
    result = subprocess.run(
        [str(REPO / "scripts" / "image")],
        capture_output=True,
        text=True,
        timeout=_BUILD_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        reason = _podman_cannot_run_containers()
        if reason:
            _unavailable(reason)
        pytest.fail(f"scripts/image failed:\n{result.stderr[-6000:]}")
    # The image by its id, not its tag: another checkout on this machine building the same tag
    # must not swap the image under this session's containers.
    tag = result.stdout.split()[-1]
    return podman("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


@pytest.fixture(scope="session")
def redis_image(image: str) -> str:
    """The Redis stand-in (tests/image/redis.Containerfile), on the base scripts/image made."""
    podman("build", "--pull=never", "--format", "docker", "--tag", REDIS_IMAGE,
           "--file", str(HERE / "redis.Containerfile"), str(HERE), timeout=900)  # fmt: skip
    return REDIS_IMAGE


@pytest.fixture(scope="module")
def pod(image: str, redis_image: str) -> Iterator[Pod]:
    """A pod with both Redis servers running as their StatefulSets run them; removed with all
    it holds."""
    pod = Pod()
    try:
        pod.start_redis()
        yield pod
    finally:
        pod.remove()


@pytest.fixture(scope="session")
def hardened(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ...]:
    """How the OCR worker's manifest runs its container (uid 10001, read-only root, no
    capability, no_new_privs, its limits, /tmp in memory), without its environment."""
    secret = {"airlock-redis": {"password": "-", "result-cache-key": "-"}}
    spec = workload(manifests(), "airlock-ocr-worker", secret, tmp_path_factory.mktemp("hardened"))
    return spec.flags


def embedded_selection(paths: list[Path]) -> dict[str, Any]:
    """``airlock extract --json`` on this host, in this process's sandbox (no broker)."""
    env = {k: v for k, v in os.environ.items() if k != "AIRLOCK_BROKER_URL"}
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "airlock"), "extract", "--json", *map(str, paths)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    selection: dict[str, Any] = json.loads(result.stdout)
    return selection


def as_streamed(selection: dict[str, Any]) -> dict[str, Any]:
    """The CLI's selection as the bridge's stream result carries it to a request that does not
    ask for the page map: the spec's fields only (the page markers are in the text)."""
    return {key: value for key, value in selection.items() if key != "pages"}


@pytest.fixture(scope="session")
def embedded(corpus_dir: Path) -> dict[str, Any]:
    """The smoke job's selection by the embedded path, every file admitted."""
    selection = embedded_selection([corpus_dir / name for name in SMOKE_FILES])
    assert selection["dropped"] == []
    return selection
