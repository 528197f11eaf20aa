"""tesseract's own TESSDATA_PREFIX reaches the jailed tesseract, so a deployment's models are used.

The child's environment is rebuilt from the policy; a variable dropped there would leave a
custom model directory granted to Landlock but never read.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.errors import ParserError
from sandbox.runner import SandboxRunner

#: Debian installs the models under the tesseract major version's directory.
SYSTEM_MODELS = next(Path("/usr/share/tesseract-ocr").glob("*/tessdata"))


@pytest.fixture
def models() -> Iterator[Path]:
    """A model directory a jailed child's uid can read (tmp_path's parents are 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="airlock-tessdata-", dir="/tmp"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


def _ocr(corpus_dir: Path) -> str:
    payload = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    with SandboxRunner(warm_children=1) as runner:
        return runner.run("image", "image/tiff", payload).text


def test_the_models_come_from_tessdata_prefix(
    models: Path, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TESSDATA_PREFIX", str(models))
    with pytest.raises(ParserError, match="eng"):
        _ocr(corpus_dir)  # the directory holds no English model yet

    shutil.copytree(SYSTEM_MODELS / "configs", models / "configs", dirs_exist_ok=True)
    for model in ("eng.traineddata", "osd.traineddata"):
        shutil.copy(SYSTEM_MODELS / model, models / model)
    for path in models.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert "quick brown dog" in _ocr(corpus_dir)
