"""The upload page at ``/``, in a real browser (Debian's chromium, driven by playwright): a PDF
and a scan dropped in come back as their selection with progress on the way, a file left out
is listed with its reason, and markup inside a file is shown as text, never run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.door.serving import Door
from tests.scanned_pdfs import scanned_pdf

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium")


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[object]:
    if CHROMIUM is None:
        pytest.fail("chromium is missing: scripts/setup --test installs it (packages-test.apt)")
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as playwright:
        # --no-sandbox: chromium's own sandbox cannot start as root, which the suite runs as.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page()
        finally:
            browser.close()


def test_a_pdf_and_a_scan_dropped_in_come_back_as_their_selection(
    browser_page: object, tmp_path: Path, corpus_dir: Path
) -> None:
    from playwright.sync_api import Page, expect  # noqa: PLC0415

    page = browser_page
    assert isinstance(page, Page)
    hostile = tmp_path / "hostile.txt"
    hostile.write_text('<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>\n')
    tool = tmp_path / "tool.exe"
    tool.write_bytes(b"MZ\x90\x00" + bytes(64))
    door = Door({}, tmp_path)
    try:
        page.goto(door.url)
        expect(page.locator("h1")).to_have_text("airlock")
        # Every status line the page shows, as the person watching it saw them.
        page.evaluate(
            """() => {
                window.seen = [];
                new MutationObserver(() => window.seen.push(
                    document.getElementById("status").textContent
                )).observe(document.getElementById("status"), {childList: true});
            }"""
        )
        scan = tmp_path / "scan.pdf"
        scan.write_bytes(scanned_pdf(corpus_dir, 3))
        page.set_input_files(
            "#files",
            [
                str(corpus_dir / "docling_multi_page.pdf"),
                str(scan),
                str(hostile),
                str(tool),
            ],
        )
        expect(page.locator("#status")).to_have_text("Done.", timeout=300_000)
        selection = page.locator("#selection").text_content() or ""
        assert "ATTACHMENT [docling_multi_page.pdf]" in selection
        assert "ATTACHMENT [scan.pdf]\n[page 1]\n" in selection
        # The scan ran for seconds: the page said so as it went, and counted its pages.
        seen = page.evaluate("window.seen")
        assert any(line.startswith("running: ") for line in seen), seen
        assert any(line.endswith(" of 3") for line in seen), seen
        # Markup from a file is text on the page: shown literally, never run.
        assert "<script>window.pwned=2</script>" in selection
        assert page.evaluate("window.pwned") is None
        assert page.locator("#selection img, #selection script").count() == 0
        omitted = page.locator("#omitted li")
        expect(omitted).to_have_count(1)
        expect(omitted).to_contain_text("tool.exe: IngestionRejected")
    finally:
        door.stop()
