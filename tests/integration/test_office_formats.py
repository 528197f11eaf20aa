"""The corpus's workbooks, decks, books, web pages, mail, notebooks, code and delimited texts,
and e-mails and ZIP archives carrying them, through real workers: each gives the selection the
embedded path gives, byte for byte."""

from __future__ import annotations

import io
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.knowledge.kinds import guess_kind
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from tests.integration.conftest import WorkerFactory
from tests.integration.refs import local_selection

pytestmark = [pytest.mark.integration, pytest.mark.redis]

WORKBOOKS = (
    "xlsx2csv_sheets.xlsx",
    "xlsx2csv_hyperlinks_continous.xlsm",
    "tika_test-columnar-biff8.xls",
    "tika_test-columnar-odf.ods",
    "pango_table.pptx",
    "tika_testPPT_various.pptx",
    "tika_LibreOfficeImpress_odp_1.3.odp",
    "tika_testODFwithOOo3.odt",
    "tika_testRTFJapanese.rtf",
    "csv-spectrum_quotes_and_newlines.csv",
    "tika_migration-overlay.tsv",
    "tika_testEPUB.epub",
    "pango_shift-jis.html",
    "mail-mime-parser_m1005.eml",
    "nbformat_test4.ipynb",
    "marked_gfm.0.29.json",
)
LIMITS = ExtractionLimits(max_total_chars=500_000)


def test_office_formats_on_the_queue_read_as_embedded(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    start_worker()
    refs = []
    for name in WORKBOOKS:
        payload = (corpus_dir / name).read_bytes()
        kind, media_type = guess_kind(name, payload[:16])
        refs.append(AttachmentRef(name, kind, media_type, payload))
    queued = gather(refs, client, limits=LIMITS, deadline=120, use_cache=False)
    assert queued == local_selection(refs, LIMITS)
    # The message's attached pictures are read as attachments of their own: OCR finds no
    # English in the red ball (tesseract's confidence 48), as it would uploaded alone.
    assert [label for label, _ in queued.dropped] == ["mail-mime-parser_m1005.eml/redball.png"]
    assert "# Вариант использования" in queued.text
    assert queued.text.count("| 0 | 0 | This is row 0 of 10 |") == 2
    assert "| This is a cat. 1-1 | That is a dog. 1-2 | This is a fox. 1-3 |" in queued.text
    assert '| 1 | ha "ha" ha |' in queued.text
    assert "# Apache Tika Test Document" in queued.text and "# This is" in queued.text
    assert "ゾルゲと尾崎、淡々と最期" in queued.text
    assert "This is the text for chapter Two" in queued.text and "nothing to see" not in queued.text
    assert "# H1です。" in queued.text
    assert "Subject: Die Hasen und die Frösche (Netscape Messenger 4.7)" in queued.text
    assert '```json\n[\n  {\n    "section": "[extension] Tables",' in queued.text
    assert "```\nhello\n```" in queued.text


def test_containers_on_the_queue_read_their_files_as_embedded(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    """An e-mail carrying a PDF, a DOCX, a scanned PDF and a program, a ZIP of a workbook, a
    deck and an e-mail, and an Outlook message whose attached message carries a PDF: the
    light stage hands the message with a scan on to the OCR stage whole, and every
    container's files come out as the embedded path reads them."""
    start_worker(concurrency=2)
    message = EmailMessage()
    message["From"] = "Ann <ann@example.com>"
    message["Subject"] = "Reports"
    message.set_content("The reports are attached.")
    for name in (
        "pypdf-samples_google-doc-document.pdf",
        "docling_word_sample.docx",
        "docling_ocr_test-scanned.pdf",
    ):
        message.add_attachment(
            (corpus_dir / name).read_bytes(), "application", "octet-stream", filename=name
        )
    message.add_attachment(b"MZ\x90\x00program", "application", "x-msdownload", filename="a.exe")
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("xlsx2csv_sheets.xlsx", "pango_table.pptx", "mail-mime-parser_m0001.eml"):
            archive.writestr(f"q3/{name}", (corpus_dir / name).read_bytes())
    outlook = Path(__file__).parents[1] / "data" / "office" / "msg_parser_other.msg"
    refs = [
        AttachmentRef("reports.eml", "email", "message/rfc822", message.as_bytes()),
        AttachmentRef("bundle.zip", "archive", "application/zip", bundle.getvalue()),
        AttachmentRef("notice.msg", "email", "application/vnd.ms-outlook", outlook.read_bytes()),
    ]
    limits = ExtractionLimits(max_total_chars=500_000, max_nesting_depth=2)
    queued = gather(refs, client, limits=limits, deadline=180, use_cache=False)
    assert queued == local_selection(refs, limits)
    assert [entry.rpartition(":")[0] for entry in queued.revision.split("|")] == [
        "reports.eml",
        "reports.eml/pypdf-samples_google-doc-document.pdf",
        "reports.eml/docling_word_sample.docx",
        "reports.eml/docling_ocr_test-scanned.pdf",
        "bundle.zip/q3/xlsx2csv_sheets.xlsx",
        "bundle.zip/q3/pango_table.pptx",
        "bundle.zip/q3/mail-mime-parser_m0001.eml",
        "notice.msg",
        "notice.msg/北京 2017年12月02-03日 销售主管 确认n.pdf",
    ]
    assert [label for label, _ in queued.dropped] == ["reports.eml/a.exe"]
    assert "ATTACHMENT [reports.eml/docling_ocr_test-scanned.pdf]\n[page 1]\n" in queued.text
