"""The corpus's workbooks, decks, books, web pages, mail, notebooks, code and delimited texts
through real workers: each gives the selection the embedded path gives, byte for byte."""

from __future__ import annotations

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
    assert queued.dropped == ()
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
