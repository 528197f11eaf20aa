"""The installed ``airlock`` command behaves like a Unix tool: help, version, JSON, streams,
exit codes, progress only for a person at a terminal, configuration errors as usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_on_a_terminal
from tests.pdf_builders import pdf_with_text_lines
from tests.scanned_pdfs import scanned_pdf

AIRLOCK = Path(sys.executable).parent / "airlock"


def airlock(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    return subprocess.run(
        [str(AIRLOCK), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    good = tmp_path / "notes.txt"
    good.write_text("first line\r\nsecond line  \n")
    bad = tmp_path / "tool.exe"
    bad.write_bytes(b"MZ\x90\x00")
    return good, bad


def test_help_and_version_go_to_stdout_and_exit_0() -> None:
    helped = airlock("--help")
    assert helped.returncode == 0 and "extract" in helped.stdout and "doctor" in helped.stdout
    assert airlock("extract", "--help").stdout.startswith("usage: airlock extract")
    version = airlock("--version")
    assert version.returncode == 0 and version.stdout.startswith("airlock ")


def test_json_carries_the_whole_selection(files: tuple[Path, Path]) -> None:
    good, bad = files
    done = airlock("extract", "--json", "--kind", "text", str(good))
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout) == {
        "text": "ATTACHMENT [notes.txt]\nfirst line\nsecond line\n",
        "revision": f"notes.txt:{good.stat().st_size}",
        "dropped": [],
        "pages": [{"label": "notes.txt", "pages": []}],  # plain text has no pages
    }
    partial = airlock("extract", "--json", str(good), str(bad))
    assert partial.returncode == 1
    selection = json.loads(partial.stdout)
    assert [label for label, _ in selection["dropped"]] == ["tool.exe"]
    assert "omitted tool.exe: " in partial.stderr


def test_text_on_stdout_omissions_on_stderr(files: tuple[Path, Path]) -> None:
    good, bad = files
    done = airlock("extract", str(good), str(bad))
    assert done.returncode == 1
    assert done.stdout == "ATTACHMENT [notes.txt]\nfirst line\nsecond line\n\n"
    assert done.stderr.splitlines()[0].startswith("airlock: omitted tool.exe: IngestionRejected")
    # No terminal on stderr: no progress counter mixed into a log or a pipe.
    assert "extracting" not in done.stderr


def test_progress_is_shown_to_a_terminal(files: tuple[Path, Path]) -> None:
    good, _ = files
    status, stdout, shown = run_on_a_terminal(
        [str(AIRLOCK), "extract", str(good), str(good)],
        {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")},
    )
    assert status == 0
    assert b"extracting 2/2" in shown
    assert b"extracting" not in stdout


def test_standard_input_is_read_when_named_dash() -> None:
    """``-`` reads standard input, its kind told by its bytes (a PDF here), labelled stdin."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    done = subprocess.run(
        [str(AIRLOCK), "extract", "--json", "-"],
        input=pdf_with_text_lines(["read from a pipe"]),
        capture_output=True,
        timeout=120,
        env=clean,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    selection = json.loads(done.stdout)
    assert selection["text"].startswith("ATTACHMENT [stdin]\n")
    assert "read from a pipe" in selection["text"]
    assert selection["dropped"] == []


@pytest.mark.slow
def test_the_pages_of_one_long_document_are_shown_to_a_terminal(
    tmp_path: Path, corpus_dir: Path
) -> None:
    """One scanned document shows its pages as they are read, not minutes of silence."""
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(scanned_pdf(corpus_dir, 3))
    status, stdout, shown = run_on_a_terminal(
        [str(AIRLOCK), "extract", str(scan)],
        {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")},
        timeout=300,
    )
    assert status == 0, shown
    assert b"extracting 0/1, page 1/3" in shown
    assert b"page 3/3" in shown
    assert shown.rstrip().endswith(b"extracting 1/1")
    assert b"extracting" not in stdout


@pytest.mark.slow
def test_unreadable_text_is_omitted_with_its_reason_or_admitted_flagged(tmp_path: Path) -> None:
    broken = tmp_path / "broken.txt"
    broken.write_text("\ufffd" * 50, encoding="utf-8")
    omitted = airlock("extract", str(broken))
    assert omitted.returncode == 1 and omitted.stdout == ""
    assert "omitted broken.txt: ExtractionFailed" in omitted.stderr
    assert "UnreadableText: 100% of characters are replacement" in omitted.stderr
    admitted = airlock("extract", "--admit-unreadable", str(broken))
    assert admitted.returncode == 0 and admitted.stderr == ""
    assert admitted.stdout.startswith(
        "ATTACHMENT [broken.txt]\n[airlock: text quality low: 100% of characters"
    )
    by_env = airlock("extract", str(broken), env={"AIRLOCK_ADMIT_UNREADABLE": "1"})
    assert by_env.stdout == admitted.stdout


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["extract", "--ocr-language", "eng,--psm", "README.md"], {}),
        (["extract", "--ocr-language", "scripts", "README.md"], {}),
        (
            ["extract", "--ocr-language", "hin", "--broker", "redis://x", "--max-pixels", "9", "a"],
            {},
        ),
        # A language this host has no pack for: refused at start, naming the package.
        (["extract", "--ocr-language", "zzz", "README.md"], {}),
        (["extract", "README.md"], {"AIRLOCK_OCR_LANGUAGE": "eng,zzz"}),
        (
            ["worker"],
            {"AIRLOCK_OCR_LANGUAGE": "zzz", "AIRLOCK_BROKER_URL": "redis://127.0.0.1:1/0"},
        ),
        (["serve", "--port", "1"], {"AIRLOCK_OCR_LANGUAGE": "zzz"}),
        # The queue's workers parse with their own settings: the flag would do nothing there.
        (["extract", "--admit-unreadable", "--broker", "redis://127.0.0.1:1/0", "README.md"], {}),
        (["extract", "README.md"], {"AIRLOCK_SANDBOX_REQUIRE": "seccom"}),
        (["doctor"], {"AIRLOCK_SANDBOX_REQUIRE": "seccom"}),
        (["extract", "README.md"], {"AIRLOCK_SANDBOX_MEMORY_MB": "lots"}),
        (["frobnicate"], {}),
        ([], {}),
    ],
)
def test_usage_and_configuration_errors_exit_2_with_one_line(
    args: list[str], env: dict[str, str]
) -> None:
    failed = airlock(*args, env=env)
    assert failed.returncode == 2, failed
    assert "Traceback" not in failed.stderr
    assert failed.stdout == ""
    if "zzz" in " ".join([*args, *env.values()]):
        flag = "--ocr-language" if "--ocr-language" in args else "AIRLOCK_OCR_LANGUAGE"
        assert failed.stderr.startswith(f"airlock: {flag}: OCR language 'zzz' is not installed")
        assert "apt-get install tesseract-ocr-zzz" in failed.stderr


def test_the_ocr_language_travels_with_queued_jobs_instead_of_being_refused() -> None:
    """Through the queue the flag is the request's own language (each job carries it): it
    gets as far as the broker, where a local-only flag stops at the command line."""
    queued = airlock(
        "extract", "--broker", "redis://127.0.0.1:1/0", "--ocr-language", "hin", "README.md"
    )
    assert queued.returncode == 3, queued
    assert queued.stderr.startswith("airlock: the extraction queue is unreachable")


def test_doctor_reports_the_layers_as_json() -> None:
    report = airlock("doctor", "--json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    assert document["healthy"] is True and document["tcp_blocked"] is True
    assert "seccomp" in document["active"] and document["missing_required"] == []
    assert "eng" in document["tesseract"]["languages"]


def test_doctor_reports_a_missing_required_layer_and_exits_1() -> None:
    # A uid base this high leaves no uid to drop to: the uid drop really fails on this host.
    env = {
        "AIRLOCK_SANDBOX_UID_BASE": str(2**32 - 1),
        "AIRLOCK_SANDBOX_REQUIRE": "uid_drop,seccomp",
    }
    report = airlock("doctor", env=env)
    assert report.returncode == 1, report.stderr
    assert (
        "required (AIRLOCK_SANDBOX_REQUIRE): seccomp, uid_drop; MISSING uid_drop" in report.stdout
    )
    assert report.stderr == "airlock: the sandbox does not hold as required on this host\n"


def test_local_commands_import_neither_celery_nor_the_sandbox_probes() -> None:
    """``--version`` and a local extraction once spent 0.6 CPU-s importing Celery, the doctor's
    probes and the bridge service before any work; each command now imports what it uses."""
    modules = subprocess.run(
        [sys.executable, "-c", "import sys, worker.cli; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not [name for name in modules if name.split(".")[0] == "celery"]
    for heavy in ("sandbox.doctor", "worker.application", "bridge.service.server"):
        assert heavy not in modules, heavy
