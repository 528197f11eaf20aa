"""The CLI's exit codes that need no worker: 0 and 1 locally, 2 for usage, 3 for the broker.

Queue-mode 0 and 1 are in tests/integration/test_roundtrip.py, against a real worker.
"""

from __future__ import annotations

import json
import resource
import socket
from pathlib import Path

import pytest

from tests.pdf_builders import pdf_of_pages
from worker import application
from worker.cli import EXIT_BROKER, EXIT_OK, EXIT_OMITTED, EXIT_USAGE, main
from worker.config import Settings

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("AIRLOCK_BROKER_URL", "AIRLOCK_RESULT_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "note.txt"
    path.write_text("hello\n")
    return path


def test_local_mode_exit_codes(
    note: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extract", str(note)]) == EXIT_OK
    assert capsys.readouterr().out.startswith("ATTACHMENT [note.txt]\nhello\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["extract", str(note), str(empty)]) == EXIT_OMITTED
    assert "omitted empty.txt" in capsys.readouterr().err


def test_a_path_that_cannot_be_read_costs_only_its_own_file(
    note: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, directory = tmp_path / "missing.pdf", tmp_path / "folder.txt"
    directory.mkdir()
    assert main(["extract", "--json", str(missing), str(note), str(directory)]) == EXIT_OMITTED
    out, err = capsys.readouterr()
    selection = json.loads(out)
    assert selection["text"].startswith("ATTACHMENT [note.txt]\nhello\n")
    # Omitted like any refused file: in the selection's dropped, with its reason, in order.
    assert selection["dropped"] == [
        ["missing.pdf", f"IngestionRejected: cannot read {missing}: No such file or directory"],
        ["folder.txt", f"IngestionRejected: cannot read {directory}: Is a directory"],
    ]
    assert f"airlock: omitted missing.pdf: IngestionRejected: cannot read {missing}: " in err
    assert "Errno" not in err


def test_a_file_over_the_byte_ceiling_is_refused_without_being_held(
    note: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sparse 600 MB file costs no memory (the CLI once held 680 MB before refusing it), and
    the refusal names its true size, as the guard before dispatch words it."""
    huge = tmp_path / "huge.pdf"
    with huge.open("wb") as file:
        file.truncate(600 * 2**20)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    code = main(["extract", "--json", "--max-bytes", "1000", str(huge), str(note)])
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert code == EXIT_OMITTED
    selection = json.loads(capsys.readouterr().out)
    assert selection["text"].startswith("ATTACHMENT [note.txt]")
    [[label, reason]] = selection["dropped"]
    assert label == "huge.pdf"
    assert reason.startswith("IngestionRejected: attachment 'huge.pdf' is 629145600 bytes, ")
    assert "--max-bytes 629145600" in reason
    assert peak_after - peak_before < 100 * 2**20


def test_an_endless_file_is_read_one_byte_past_the_ceiling(
    note: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extract", "--max-bytes", "4096", "/dev/zero", str(note)]) == EXIT_OMITTED
    out, err = capsys.readouterr()
    assert out.startswith("ATTACHMENT [note.txt]")
    assert "omitted zero: IngestionRejected: attachment 'zero' is 4097 bytes or more" in err
    assert "raise max_bytes to at least 4097" in err


def test_an_unreachable_broker_exits_3(
    note: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["extract", "--broker", UNREACHABLE, str(note)]) == EXIT_BROKER
    assert "unreachable" in capsys.readouterr().err
    monkeypatch.setenv("AIRLOCK_BROKER_URL", UNREACHABLE)
    assert main(["extract", str(note)]) == EXIT_BROKER


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        # Standard input twice: the second read found it spent, and omitted it as empty.
        ["extract", "-", "-"],
    ],
)
def test_usage_errors_exit_2(note: Path, arguments: list[str]) -> None:
    assert main([str(note) if arg == "NOTE" else arg for arg in arguments]) == EXIT_USAGE


def test_unparseable_arguments_exit_2(note: Path) -> None:
    for arguments in (
        ["extract"],
        ["extract", "--deadline", "soon", str(note)],
        ["extract", "--pool", "solo", str(note)],
        ["extract", "--kind", "bogus", str(note)],
        ["extract", "--kind", "PDF", str(note)],
        # Numbers a flag cannot take are argparse's to refuse, naming the flag: "--max-pages
        # 0" was refused in the words of ExtractionLimits, "--deadline -5" not at all.
        ["extract", "--max-pages", "0", str(note)],
        ["extract", "--max-expansion-ratio", "inf", str(note)],
        ["extract", "--broker", UNREACHABLE, "--deadline", "0", str(note)],
        ["extract", "--deadline", "-5", str(note)],
        ["frobnicate"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(arguments)
        assert exited.value.code == EXIT_USAGE


def test_serve_listens_only_on_a_port_it_can_announce(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--port 99999 was announced as such and listened on 34463 (the kernel takes it modulo
    65536); a port in use was announced as served, then failed in uvicorn's words, exit 3."""
    for port in ("99999", "0", "http"):
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--port", port])
        assert exited.value.code == EXIT_USAGE
        assert "must be a port (1 to 65535)" in capsys.readouterr().err
    monkeypatch.setenv("AIRLOCK_HTTP_PORT", "70000")
    assert main(["serve"]) == EXIT_USAGE
    assert "AIRLOCK_HTTP_PORT='70000' must be a port" in capsys.readouterr().err
    monkeypatch.delenv("AIRLOCK_HTTP_PORT")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert error == f"airlock: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_an_impossible_configuration_exits_2(note: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_VISIBILITY_TIMEOUT", "1")
    assert main(["extract", "--broker", UNREACHABLE, str(note)]) == EXIT_USAGE


def test_a_page_ceiling_names_the_flag_and_variable_that_admit_the_file(
    note: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    book = tmp_path / "book.pdf"
    book.write_bytes(pdf_of_pages(25))
    assert main(["extract", str(book)]) == EXIT_OMITTED
    assert capsys.readouterr().err.endswith(
        "CeilingExceeded: 25 pages exceeds the 20-page ceiling; "
        "raise max_pages (--max-pages 25, AIRLOCK_MAX_PAGES=25)\n"
    )
    assert main(["extract", "--max-pages", "25", str(book)]) == EXIT_OK
    assert capsys.readouterr().out.count("Hello") == 25
    monkeypatch.setenv("AIRLOCK_MAX_PAGES", "25")
    assert main(["extract", str(book)]) == EXIT_OK
    assert main(["extract", "--max-pages", "24", str(book)]) == EXIT_OMITTED  # the flag wins


def test_each_text_ceiling_names_the_value_that_admits_the_file(
    note: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A register of 250,000 characters meets three ceilings in turn; each refusal names the
    next step, and following them admits it (the parser's own budget follows --max-chars)."""
    register = tmp_path / "register.txt"
    register.write_text("x" * 250_000)
    assert main(["extract", str(register)]) == EXIT_OMITTED
    assert capsys.readouterr().err.endswith(
        "more than 200000 characters of text exceeds the 50000-character ceiling; raise "
        "max_text_chars to at least 200001 (--max-text-chars 200001, "
        "AIRLOCK_MAX_TEXT_CHARS=200001)\n"
    )
    assert main(["extract", "--max-chars", "200001", str(register)]) == EXIT_OMITTED
    assert capsys.readouterr().err.endswith(
        "extracted to 250000 characters, which exceeds the 200001-character ceiling; extracted "
        "text is dropped, never truncated — a cut fact reads as a complete one. To admit it, "
        "raise max_text_chars (--max-text-chars 250000, AIRLOCK_MAX_TEXT_CHARS=250000).\n"
    )
    assert main(["extract", "--max-chars", "250000", str(register)]) == EXIT_OMITTED
    block = len("ATTACHMENT [register.txt]\n") + 250_000
    assert capsys.readouterr().err.endswith(
        "would take the assembled block past the 120000-character ceiling; raise "
        f"max_total_chars (--max-total-chars {block}, AIRLOCK_MAX_TOTAL_CHARS={block})\n"
    )
    arguments = ["extract", "--max-chars", "250000", "--max-total-chars", str(block)]
    assert main([*arguments, str(register)]) == EXIT_OK


def test_worker_hands_every_argument_to_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Settings, list[str]]] = []
    monkeypatch.setattr(
        application,
        "run_worker",
        lambda settings, args: calls.append((settings, args)) or 0,  # type: ignore[func-returns-value]
    )
    monkeypatch.setenv("AIRLOCK_QUEUES", "airlock.ocr")
    assert main(["worker", "--pool", "prefork", "-c", "1", "--help"]) == 0
    [(settings, arguments)] = calls
    assert settings.queues == ("airlock.ocr",)
    assert arguments == ["--pool", "prefork", "-c", "1", "--help"]
