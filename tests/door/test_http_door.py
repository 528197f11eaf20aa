"""``airlock serve`` started as a user starts it, asked by real HTTP clients (httpx and curl):
the same selection as ``airlock extract --json`` byte for byte, the drop-ins' shapes, every
refusal typed with its status, keys that keep tenants apart, and a 2 GB upload refused at the
ceiling with the server's memory flat."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.door.serving import AIRLOCK, Door, busy_child, cpu_until_gone
from tests.integration.load import wait_until
from tests.metrics_scrape import free_port
from tests.pdf_builders import slow_text_pdf

pytestmark = pytest.mark.slow


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    serving = Door({}, tmp_path)
    yield serving
    serving.stop()


def _cli_json(path: Path) -> bytes:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    done = subprocess.run(
        [str(AIRLOCK), "extract", "--json", str(path)],
        capture_output=True,
        env=clean,
        timeout=300,
        check=False,
    )
    return done.stdout


@pytest.mark.parametrize(
    "name",
    [
        "docling_multi_page.pdf",
        "docling_docx_lists.docx",
        "csv-spectrum_utf8.csv",
        "docling_ocr_test-scanned.pdf",
    ],
)
def test_a_raw_upload_answers_what_the_cli_prints_byte_for_byte(
    door: Door, corpus_dir: Path, name: str
) -> None:
    path = corpus_dir / name
    answered = httpx.post(
        f"{door.url}/v1/extract?wait=300",
        content=path.read_bytes(),
        headers={"X-Filename": quote(name), "Content-Type": "application/octet-stream"},
        timeout=310,
    )
    assert answered.status_code == 200, answered.text
    assert answered.headers["content-type"] == "application/json"
    assert answered.content == _cli_json(path)


def test_a_form_of_several_files_answers_one_selection_in_their_order(
    door: Door, corpus_dir: Path, tmp_path: Path
) -> None:
    note = tmp_path / "note.txt"
    note.write_text("a short note\n")
    docx = corpus_dir / "docling_docx_lists.docx"
    files = [
        ("file", ("note.txt", note.read_bytes(), "text/plain")),
        ("file", ("docling_docx_lists.docx", docx.read_bytes(), "application/octet-stream")),
    ]
    answered = httpx.post(f"{door.url}/v1/extract", files=files, timeout=120)
    assert answered.status_code == 200, answered.text
    selection = answered.json()
    assert selection["text"].startswith("ATTACHMENT [note.txt]\na short note\n")
    assert "ATTACHMENT [docling_docx_lists.docx]" in selection["text"]
    assert selection["revision"] == f"note.txt:13|docling_docx_lists.docx:{docx.stat().st_size}"


def test_a_request_reads_its_scans_in_the_ocr_language_it_names(
    door: Door, corpus_dir: Path
) -> None:
    """``?ocr_language=`` replaces the service's AIRLOCK_OCR_LANGUAGE for that request alone:
    an English scan read as Hindi is refused naming Hindi; the next request reads it."""
    scan = (corpus_dir / "tesseract_eurotext.tif").read_bytes()
    headers = {"X-Filename": "eurotext.tif", "Content-Type": "application/octet-stream"}
    url = f"{door.url}/v1/extract?wait=120"
    in_hindi = httpx.post(f"{url}&ocr_language=hin", content=scan, headers=headers, timeout=130)
    assert in_hindi.status_code == 200, in_hindi.text
    [(label, reason)] = in_hindi.json()["dropped"]
    assert label == "eurotext.tif"
    assert "the image is not text in the OCR language (hin)" in reason
    own = httpx.post(url, content=scan, headers=headers, timeout=130)
    assert own.status_code == 200, own.text
    assert "The (quick) [brown] {fox} jumps!" in own.json()["text"]
    # A query's '+' is a space once decoded; no language holds one, so it is read as '+'.
    both = httpx.post(f"{url}&ocr_language=eng+hin", content=scan, headers=headers, timeout=130)
    assert both.status_code == 200, both.text
    assert "The (quick) [brown] {fox} jumps!" in both.json()["text"]


def test_a_door_holds_request_languages_to_its_operators_list(tmp_path: Path) -> None:
    held = Door({"AIRLOCK_OCR_REQUEST_LANGUAGES": "none"}, tmp_path)
    try:
        url = f"{held.url}/v1/extract?wait=60"
        asked = httpx.post(f"{url}&ocr_language=eng", content=b"a note", timeout=70)
        assert asked.status_code == 422, asked.text
        assert asked.json()["error"]["reason"] == (
            "ocr_language: this service reads scans with its own OCR languages only "
            "(AIRLOCK_OCR_REQUEST_LANGUAGES=none); ask without ocr_language"
        )
        plain = httpx.post(url, content=b"a note", timeout=70)
        assert plain.status_code == 200, plain.text
    finally:
        held.stop()


def test_open_webui_and_tika_drop_ins(door: Door, tmp_path: Path, corpus_dir: Path) -> None:
    body = "Café crème\n".encode("latin-1")
    # Open WebUI's ExternalDocumentLoader: PUT {url}/process, raw body, X-Filename URL-quoted.
    processed = httpx.put(
        f"{door.url}/process",
        content=body,
        headers={"Content-Type": "text/plain", "X-Filename": quote("menü.txt")},
        timeout=60,
    )
    assert processed.status_code == 200, processed.text
    answer = processed.json()
    assert answer["page_content"] == "ATTACHMENT [menü.txt]\nCafé crème\n"
    assert answer["metadata"]["source"] == "menü.txt"
    assert answer["metadata"]["dropped"] == []
    # A file left out is an error Open WebUI shows, never an empty document.
    empty = httpx.put(f"{door.url}/process", content=b"", headers={"X-Filename": "e.txt"})
    assert empty.status_code == 422
    assert empty.json()["error"]["type"] == "Omitted"
    assert "e.txt" in empty.json()["error"]["reason"]
    # Tika's text endpoint, through curl as Tika's users call it.
    note = tmp_path / "note.txt"
    note.write_bytes(body)
    command = [
        "curl", "-sS", "-T", str(note), "-H", "Accept: text/plain",
        "-H", "Content-Disposition: attachment; filename=note.txt", f"{door.url}/tika",
    ]  # fmt: skip
    tika = subprocess.run(
        command,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert tika.stdout.decode() == "ATTACHMENT [note.txt]\nCafé crème\n"
    # Tika's clients name a file by its Content-Type alone: an EPUB was refused as a DOCX
    # without [Content_Types].xml, an e-mail came back as its raw MIME source, and a page of
    # HTML that does not open with <html> was read as text, tags and all.
    fragment = b"<p>Hello <b>world</b></p><script>alert(1)</script>"
    epub = (corpus_dir / "tika_testEPUB.epub").read_bytes()
    mail = (corpus_dir / "mail-mime-parser_m1005.eml").read_bytes()
    for body, media_type, read, not_read in (
        (epub, "application/epub+zip", "Chapter 1", "Content_Types"),
        (mail, "message/rfc822", "Die Hasen und die Frösche", "Content-Transfer-Encoding"),
        (fragment, "text/html; charset=utf-8", "\nHello world", "<p>"),
    ):
        answered = httpx.put(
            f"{door.url}/tika",
            content=body,
            headers={"Content-Type": media_type, "Accept": "text/plain"},
            timeout=60,
        )
        assert answered.status_code == 200, answered.text
        assert read in answered.text
        assert not_read not in answered.text


def test_every_refusal_is_typed_with_its_status(door: Door) -> None:
    def refused(response: httpx.Response, status: int, kind: str) -> str:
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["type"] == kind
        return str(error["reason"])

    extract = f"{door.url}/v1/extract"
    unknown = httpx.post(extract, content=b"MZ\x90\x00\x03" + bytes(200))
    assert "it reads archive, docx, email" in refused(unknown, 415, "UnsupportedFormat")
    over = httpx.post(f"{extract}?max_pages=100000", content=b"text")
    assert (
        refused(over, 422, "InvalidRequest")
        == "max_pages must be an integer above 0 and at most 20"
    )
    refused(httpx.post(f"{extract}?max_pages=two", content=b"text"), 422, "InvalidRequest")
    refused(httpx.post(f"{extract}?wait=-1", content=b"text"), 422, "InvalidRequest")
    refused(httpx.post(f"{extract}?kind=exe", content=b"text"), 422, "InvalidRequest")
    for language in ("-l", "eng%0A", "../eng", "scripts", "a%2Bb%2Bc%2Bd%2Be"):
        bad = httpx.post(f"{extract}?ocr_language={language}", content=b"text")
        assert "is not tesseract language names" in refused(bad, 422, "InvalidRequest")
    refused(httpx.post(extract, files={"field": (None, "not a file")}), 422, "InvalidRequest")
    refused(httpx.get(f"{door.url}/v1/jobs/no-such-job"), 404, "NotFound")
    declared = httpx.post(f"{extract}?max_bytes=100", content=b"x" * 101)
    assert refused(declared, 413, "PayloadTooLarge").startswith(
        "attachment 'upload' is 101 bytes, which exceeds the 100-byte raw-input ceiling"
    )


def test_a_2_gb_upload_is_refused_at_the_ceiling_with_the_servers_memory_flat(
    door: Door,
) -> None:
    """Chunked (no length to refuse it by): read up to the 1 MB ceiling, refused at the chunk
    that passes it; the other 2 GB are never read, and the server holds no more than before."""
    before = door.resident_bytes()
    gigabytes = 2 << 30
    feeder = subprocess.Popen(["head", "-c", str(gigabytes), "/dev/zero"], stdout=subprocess.PIPE)
    sent = subprocess.run(
        [
            "curl", "-sS", "-X", "POST", "-o", "-", "-w", "\n%{http_code}", "-T", "-",
            "-H", "X-Filename: huge.txt",
            f"{door.url}/v1/extract?max_bytes=1000000",
        ],
        stdin=feeder.stdout,
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    feeder.kill()
    feeder.wait()
    body, _, status = sent.stdout.decode().rpartition("\n")
    assert status == "413", sent
    assert "bytes or more, which exceeds the 1000000-byte raw-input ceiling" in body
    assert body.endswith('; the rest was not read."}}')
    assert door.resident_bytes() - before < 64 << 20
    # The server took no harm: the next request is answered.
    assert httpx.post(f"{door.url}/v1/extract", content=b"after").status_code == 200


def test_a_job_not_done_within_wait_is_answered_202_and_read_at_its_url(
    door: Door, corpus_dir: Path
) -> None:
    scan = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
    accepted = httpx.post(
        f"{door.url}/v1/extract?wait=0", content=scan, headers={"X-Filename": "scan.pdf"}
    )
    assert accepted.status_code == 202, accepted.text
    url = accepted.headers["location"]
    assert accepted.json()["url"] == url and accepted.json()["state"] in ("queued", "running")
    deadline = time.monotonic() + 300
    while (status := httpx.get(url).json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert status["state"] == "done"
    assert (status["pages_done"], status["pages_total"]) == (1, 1)
    assert "Docling bundles PDF document conversion" in status["selection"]["text"]
    # Deleting a finished job forgets its answer.
    assert httpx.delete(url).json()["state"] == "done"
    assert httpx.get(url).status_code == 404


def test_a_queued_job_is_withdrawn_before_it_runs(tmp_path: Path, corpus_dir: Path) -> None:
    """One job at a time: the second waits, and DELETE takes it out before it starts."""
    serving = Door({"AIRLOCK_CONCURRENCY": "1"}, tmp_path)
    try:
        scan = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
        first, second = (
            httpx.post(
                f"{serving.url}/v1/extract?wait=0", content=scan, headers={"X-Filename": name}
            ).headers["location"]
            for name in ("first.pdf", "second.pdf")
        )
        withdrawn = httpx.delete(second)
        assert withdrawn.status_code == 200
        assert withdrawn.json()["state"] == "withdrawn"
        assert withdrawn.json()["files_done"] == 0  # taken out before it started
        assert httpx.get(second).status_code == 404  # gone, as a deleted resource is
        deadline = time.monotonic() + 300
        while httpx.get(first).json()["state"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert httpx.get(first).json()["state"] == "done"
    finally:
        serving.stop()


def test_the_uploads_jobs_hold_together_are_bounded(tmp_path: Path) -> None:
    """1 MiB of uploads at most: a slow job runs, 600 KB waits behind it, and 600 KB more is
    answered 429 until the waiting job goes; a request larger than the whole bound is 413."""
    door = Door({"AIRLOCK_CONCURRENCY": "1", "AIRLOCK_HTTP_MAX_HELD_MB": "1"}, tmp_path)
    text = b"words " * 100_000

    def post(content: bytes | Iterator[bytes], name: str) -> httpx.Response:
        return httpx.post(
            f"{door.url}/v1/extract?wait=0", content=content, headers={"X-Filename": name}
        )

    try:
        running = post(slow_text_pdf(), "slow.pdf").headers["location"]
        waiting = post(text, "waiting.txt")
        assert waiting.status_code == 202, waiting.text
        for refused in (post(text, "declared.txt"), post(iter([text]), "chunked.txt")):
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert error["type"] == "ServerBusy"
            assert "AIRLOCK_HTTP_MAX_HELD_MB" in error["reason"]
        too_large = post(b"x" * (1024 * 1024 + 1), "large.txt")
        assert too_large.status_code == 413, too_large.text
        assert "AIRLOCK_HTTP_MAX_HELD_MB" in too_large.json()["error"]["reason"]
        assert httpx.delete(waiting.headers["location"]).json()["state"] == "withdrawn"
        admitted = post(text, "after.txt")  # the withdrawn job's bytes were given back
        assert admitted.status_code == 202, admitted.text
        httpx.delete(running)
        httpx.delete(admitted.headers["location"])
    finally:
        door.stop()


def _held_bytes(door: Door) -> float:
    for line in httpx.get(f"{door.url}/metrics").text.splitlines():
        if line.startswith("airlock_http_held_bytes "):
            return float(line.split()[1])
    raise AssertionError("no airlock_http_held_bytes")


def _readiness(door: Door) -> int:
    return httpx.get(f"{door.url}/readyz").status_code


def test_bodies_still_arriving_are_held_too(tmp_path: Path) -> None:
    """A body trickling in holds its bytes as they arrive (20 slow clients once pinned 150 MiB
    against a 2 MiB bound), and gives them back when its client leaves, without a traceback
    in the log for it."""
    door = Door({"AIRLOCK_HTTP_MAX_HELD_MB": "1"}, tmp_path)
    try:
        chunk = b"words " * 166_000  # 996 KB of the 1 MiB
        with socket.create_connection(("127.0.0.1", door.port)) as slow:
            slow.sendall(
                b"POST /v1/extract?wait=0 HTTP/1.1\r\nHost: door\r\nX-Filename: slow.txt\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(chunk), chunk)
            )
            wait_until(lambda: _held_bytes(door) >= len(chunk), 30, "the arriving body held")
            refused = httpx.post(f"{door.url}/v1/extract?wait=0", content=b"x" * 400_000)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["type"] == "ServerBusy"
            assert _readiness(door) == 503  # less than a tenth of the bound left
        wait_until(lambda: not _held_bytes(door), 30, "the left body's bytes given back")
        accepted = httpx.post(f"{door.url}/v1/extract?wait=30", content=b"x" * 400_000)
        assert accepted.status_code == 200, accepted.text
        assert _readiness(door) == 200
    finally:
        door.stop()
    assert "Traceback" not in door.log.read_text()


def test_keys_admit_their_holders_and_keep_each_tenants_jobs_its_own(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    acme, globex = "acme-secret-key", "globex-secret-key"
    keys.write_text(
        "# name  sha256 of the key\n"
        f"acme {hashlib.sha256(acme.encode()).hexdigest()}\n"
        f"globex {hashlib.sha256(globex.encode()).hexdigest()}  # a comment\n"
    )
    assert acme not in keys.read_text()  # only hashes are stored
    serving = Door({"AIRLOCK_HTTP_KEYS_FILE": str(keys)}, tmp_path)
    try:
        extract = f"{serving.url}/v1/extract?wait=0"
        anonymous = httpx.post(extract, content=b"hello")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        wrong = httpx.post(extract, content=b"hello", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        for key in (acme, globex):
            mine = httpx.post(extract, content=b"hello", headers={"Authorization": f"Bearer {key}"})
            assert mine.status_code in (200, 202), mine.text
        # Health and the API description need no key: probes and clients read them.
        assert httpx.get(f"{serving.url}/healthz").status_code == 200
        assert httpx.get(f"{serving.url}/openapi.json").status_code == 200
    finally:
        serving.stop()


def test_a_job_url_is_another_tenants_404(tmp_path: Path, corpus_dir: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(
        f"a {hashlib.sha256(b'key-a').hexdigest()}\nb {hashlib.sha256(b'key-b').hexdigest()}\n"
    )
    serving = Door({"AIRLOCK_HTTP_KEYS_FILE": str(keys)}, tmp_path)
    try:
        scan = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
        accepted = httpx.post(
            f"{serving.url}/v1/extract?wait=0",
            content=scan,
            headers={"Authorization": "Bearer key-a", "X-Filename": "a.pdf"},
        )
        assert accepted.status_code == 202
        url = accepted.headers["location"]
        assert httpx.get(url, headers={"Authorization": "Bearer key-b"}).status_code == 404
        assert httpx.delete(url, headers={"Authorization": "Bearer key-b"}).status_code == 404
        assert httpx.get(url, headers={"Authorization": "Bearer key-a"}).json()["id"]
    finally:
        serving.stop()


def test_without_keys_it_will_not_listen_beyond_loopback(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    refused = subprocess.run(
        [str(AIRLOCK), "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "without API keys (AIRLOCK_HTTP_KEYS_FILE) airlock serve listens on loopback" in (
        refused.stderr
    )
    keys = tmp_path / "keys"
    keys.write_text("acme not-a-hash\n")
    bad = subprocess.run(
        [str(AIRLOCK), "serve", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env={**clean, "AIRLOCK_HTTP_KEYS_FILE": str(keys)},
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "never as the key itself" in bad.stderr


def test_metrics_and_the_openapi_document(door: Door) -> None:
    httpx.post(f"{door.url}/v1/extract", content=b"counted")
    metrics = httpx.get(f"{door.url}/metrics").text
    assert 'airlock_http_requests_total{route="extract",status="200"} 1.0' in metrics
    document = httpx.get(f"{door.url}/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    operations = {
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
    }
    assert {"extract", "job", "withdraw", "process", "tika"} <= operations
    schemas = document["components"]["schemas"]

    def refs(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    yield str(value)
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for item in node:
                yield from refs(item)

    for ref in refs(document):
        assert ref.rsplit("/", 1)[1] in schemas, ref
    limit = next(
        p
        for p in document["paths"]["/v1/extract"]["post"]["parameters"]
        if p["name"] == "max_pages"
    )
    assert limit["schema"]["maximum"] == 20  # this server's ceiling


def test_each_key_is_held_to_its_jobs_and_bytes_and_leaves_the_others_theirs(
    tmp_path: Path, corpus_dir: Path
) -> None:
    keys = tmp_path / "keys"
    keys.write_text(
        f"a {hashlib.sha256(b'key-a').hexdigest()}\nb {hashlib.sha256(b'key-b').hexdigest()}\n"
    )
    serving = Door(
        {
            "AIRLOCK_HTTP_KEYS_FILE": str(keys),
            "AIRLOCK_HTTP_KEY_MAX_JOBS": "1",
            "AIRLOCK_HTTP_KEY_MB_PER_MINUTE": "1",
        },
        tmp_path,
    )
    a, b = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}
    try:
        extract = f"{serving.url}/v1/extract"
        text = b"word " * 120_000  # 600,000 bytes: one fits a 1 MiB minute, two do not
        assert httpx.post(extract, content=text, headers=a, timeout=60).status_code == 200
        spent = httpx.post(extract, content=text, headers=a, timeout=60)
        assert spent.status_code == 429, spent.text
        assert spent.json()["error"]["type"] == "QuotaExceeded"
        assert int(spent.headers["retry-after"]) >= 1
        assert httpx.post(extract, content=text, headers=b, timeout=60).status_code == 200
        # One job at a time per key: b's second is refused while its first runs, a's is not.
        scan = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
        running = httpx.post(f"{extract}?wait=0", content=scan, headers=b)
        assert running.status_code == 202
        busy = httpx.post(f"{extract}?wait=0", content=b"small", headers=b)
        assert busy.status_code == 429 and busy.json()["error"]["type"] == "TooManyJobs"
        assert busy.headers["retry-after"] == "5"
        assert httpx.post(extract, content=b"small", headers=a, timeout=60).status_code == 200
    finally:
        serving.stop()


def test_delete_of_a_running_job_kills_its_sandbox_child(tmp_path: Path) -> None:
    """A page pypdf walks for about 6 CPU-s: withdrawn while it runs, its child is killed at
    once rather than left to finish for nobody, and the door takes the next job."""
    door = Door({"AIRLOCK_CONCURRENCY": "1"}, tmp_path)
    try:
        accepted = httpx.post(
            f"{door.url}/v1/extract?wait=0",
            content=slow_text_pdf(),
            headers={"X-Filename": "slow.pdf"},
        )
        url = accepted.headers["location"]
        child = busy_child({door.process.pid})
        withdrawn = httpx.delete(url)
        assert withdrawn.json()["state"] == "withdrawn"
        used = cpu_until_gone(child, {door.process.pid})
        # Killed with most of its work left: left alone it would have used about 6 CPU-s.
        assert used < 3.0, used
        after = httpx.post(f"{door.url}/v1/extract", content=b"next", timeout=60)
        assert after.status_code == 200 and after.json()["text"] == "ATTACHMENT [upload]\nnext"
    finally:
        door.stop()


def test_a_client_that_leaves_while_waiting_withdraws_its_job(tmp_path: Path) -> None:
    """It never learns the job's URL, so nobody could read the answer: the job is withdrawn
    and its child killed with most of its 6 CPU-s unspent, as a DELETE would."""
    door = Door({"AIRLOCK_CONCURRENCY": "1"}, tmp_path)
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{door.url}/v1/extract?wait=60",
                content=slow_text_pdf(),
                headers={"X-Filename": "slow.pdf"},
                # The body is sent, then the client leaves after 1.5 s: long enough for the job's
                # child to be seen at work on a loaded machine (at 0.5 s it was sometimes killed
                # before it had used the 0.3 CPU-s that tell it from a waiting child), short
                # enough that, seen within a second, it has not used 3.
                timeout=httpx.Timeout(60, read=1.5),
            )
        child = busy_child({door.process.pid})
        used = cpu_until_gone(child, {door.process.pid})
        assert used < 3.0, used
        assert "airlock_http_jobs_in_flight 0.0" in httpx.get(f"{door.url}/metrics").text
    finally:
        door.stop()


def test_answered_requests_leave_no_job_behind(tmp_path: Path) -> None:
    """A 200 is the whole answer: its job is forgotten, so a door bounded to 3 jobs serves
    any number of requests answered in full (1,000 once filled the table and refused all)."""
    door = Door({"AIRLOCK_HTTP_MAX_JOBS": "3"}, tmp_path)
    try:
        for n in range(8):
            answered = httpx.post(f"{door.url}/v1/extract", content=f"note {n}".encode())
            assert answered.status_code == 200, answered.text
            assert "content-location" not in answered.headers
        # Jobs still to be read count: three waiting, the fourth is refused until one is read.
        waiting = []
        for n in range(3):
            accepted = httpx.post(f"{door.url}/v1/extract?wait=0", content=f"later {n}".encode())
            assert accepted.status_code == 202
            waiting.append(accepted.headers["location"])
        refused = httpx.post(f"{door.url}/v1/extract?wait=0", content=b"one too many")
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "TooManyJobs"
        assert httpx.delete(waiting[0]).status_code == 200
        assert httpx.post(f"{door.url}/v1/extract", content=b"room again").status_code == 200
    finally:
        door.stop()


def test_starlettes_own_refusals_are_typed_and_a_stalled_body_is_cut(tmp_path: Path) -> None:
    """An attacker found plain-text 404/405 answers, and a declared body that never came
    holding its connection for good (a slowloris)."""
    door = Door({"AIRLOCK_HTTP_BODY_IDLE_SECONDS": "1"}, tmp_path)
    try:
        unknown = httpx.get(f"{door.url}/nope")
        assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "NotFound"
        wrong = httpx.post(f"{door.url}/process", content=b"x")
        assert wrong.status_code == 405
        assert wrong.json()["error"]["type"] == "MethodNotAllowed"
        assert "PUT" in wrong.headers["allow"]
        with socket.create_connection(("127.0.0.1", door.port), timeout=60) as stalled:
            stalled.sendall(
                b"POST /v1/extract HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nfive."
            )
            answer = stalled.recv(65536).decode()
        assert answer.startswith("HTTP/1.1 408"), answer
        assert '"type":"RequestTimeout"' in answer
        # The form's media type is matched as HTTP matches it, whatever its case.
        body = (
            b"--B\r\nContent-Disposition: form-data; name=file; filename=a.txt\r\n\r\n"
            b"hi\r\n--B--\r\n"
        )
        cased = httpx.post(
            f"{door.url}/v1/extract",
            content=body,
            headers={"Content-Type": "Multipart/Form-Data; boundary=B"},
        )
        assert cased.status_code == 200 and cased.json()["text"] == "ATTACHMENT [a.txt]\nhi"
    finally:
        door.stop()
