"""A container's files unpacked in a real jailed child: what an e-mail and a ZIP archive hand
back, in order and decoded, and the containers built to make an unpacking decode too much."""

from __future__ import annotations

import io
import os
import stat
import time
import zipfile

import pytest

from sandbox import enclosures
from sandbox.enclosures import File, Unpacked
from sandbox.errors import CeilingExceeded, MalformedAnswer
from sandbox.extractor import SandboxExtractor
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.helpers import zipped
from tests.sandbox.hostile_inputs import WALL_SECONDS
from tests.sandbox.test_mail import _attachment, _mixed

DEFAULT = ParseLimits()


def _unpack(
    runner: SandboxRunner, kind: str, payload: bytes, limits: ParseLimits = DEFAULT
) -> Unpacked:
    extractor = SandboxExtractor(runner=runner, parse_limits=limits)
    started = time.monotonic()
    unpacked = extractor.unpack(kind, "application/octet-stream", payload, max_pages=20)
    assert time.monotonic() - started < WALL_SECONDS
    return unpacked


def test_a_messages_attached_files_come_back_decoded_in_order(runner: SandboxRunner) -> None:
    """Netscape's message with two attached pictures: each decoded from base64, with its type;
    the pictures of its related HTML body belong to a rendering not shown, not attachments."""
    unpacked = _unpack(runner, "email", (CORPUS_DIR / "mail-mime-parser_m1005.eml").read_bytes())
    assert [(file.name, file.media_type, len(file.data or b"")) for file in unpacked.files] == [
        ("redball.png", "image/png", 1_453),
        ("greenball.png", "image/png", 1_298),
    ]
    assert all((file.data or b"").startswith(b"\x89PNG") for file in unpacked.files)


def test_files_of_attached_messages_follow_in_reading_order(runner: SandboxRunner) -> None:
    inner = _mixed(
        ["Content-Type: text/plain\n\ninner body", _attachment("b.txt", "text/plain", b"B")]
    )
    message = _mixed(
        [
            "Content-Type: text/plain\n\nouter body",
            _attachment("a.txt", "text/plain", b"A"),
            f"Content-Type: message/rfc822\n\n{inner.decode()}",
            _attachment("c.txt", "text/plain", b"C"),
        ],
        boundary="outer",
    )
    unpacked = _unpack(runner, "email", message)
    assert [(file.name, file.data) for file in unpacked.files] == [
        ("a.txt", b"A"),
        ("b.txt", b"B"),
        ("c.txt", b"C"),
    ]


def test_past_the_member_ceiling_files_are_counted_not_decoded(runner: SandboxRunner) -> None:
    """2,000 attachments under a ceiling of 1,024: the first 1,024 come back, the rest are a
    count; past the byte ceiling a file is named with the setting that admits it."""
    parts = ["Content-Type: text/plain\n\nthe body"] + [
        _attachment(f"f{index}.txt", "text/plain", b"x") for index in range(2_000)
    ]
    unpacked = _unpack(runner, "email", _mixed(parts))
    assert len(unpacked.files) == 1_024 and unpacked.unlisted == 976
    big = _mixed(
        [
            _attachment("small.txt", "text/plain", b"s" * 600),
            _attachment("big.bin", "application/octet-stream", os.urandom(2_000)),
            _attachment("after.txt", "text/plain", b"a" * 300),
        ]
    )
    files = _unpack(runner, "email", big, ParseLimits(max_unpacked_bytes=1_000)).files
    assert [(file.name, file.data is None, file.ceiling) for file in files] == [
        ("small.txt", False, None),
        ("big.bin", True, "max_uncompressed_bytes"),
        ("after.txt", False, None),
    ]
    assert files[1].reason == "its 2,000 bytes would take the files unpacked past 1,000 bytes"


def test_a_message_nested_past_the_depth_is_named_not_walked(runner: SandboxRunner) -> None:
    message = _attachment("deep.txt", "text/plain", b"deepest").encode()
    message = b"Content-Type: multipart/mixed; boundary=x\n\n--x\n" + message + b"\n--x--\n"
    for level in range(100):
        message = _mixed(
            [f"Content-Type: message/rfc822\n\n{message.decode()}"], boundary=f"l{level}"
        )
    files = _unpack(runner, "email", message).files
    assert len(files) == 1 and files[0].data is None
    assert files[0].reason == "it is a message nested past 8 messages"


def test_a_boundary_bomb_is_refused_when_unpacked_too(runner: SandboxRunner) -> None:
    many = _mixed(["Content-Type: text/plain\n\n"] * 20_000)
    with pytest.raises(CeilingExceeded, match="MIME parts"):
        _unpack(runner, "email", many)


def test_an_archives_files_come_back_in_its_order_without_its_folders(
    runner: SandboxRunner,
) -> None:
    payload = zipped(
        {
            "minutes/": b"",
            "minutes/2024.txt": b"we met",
            "data.csv": b"a,b\n1,2\n",
            "report.pdf": (CORPUS_DIR / "pypdf-samples_google-doc-document.pdf").read_bytes(),
        }
    )
    files = _unpack(runner, "archive", payload).files
    assert [(file.name, len(file.data or b"")) for file in files] == [
        ("minutes/2024.txt", 6),
        ("data.csv", 8),
        ("report.pdf", (CORPUS_DIR / "pypdf-samples_google-doc-document.pdf").stat().st_size),
    ]


def test_links_encrypted_and_damaged_files_are_named_with_their_reason(
    runner: SandboxRunner,
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        link = zipfile.ZipInfo("passwd")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
        archive.writestr("secret.txt", b"ciphertext")
        archive.writestr("broken.txt", b"twelve bytes")
        archive.writestr("fine.txt", b"fine")
    payload = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(payload))) as archive:
        secret, broken = archive.getinfo("secret.txt"), archive.getinfo("broken.txt")
    # secret.txt marked encrypted (flag bit 0) in both its records; broken.txt's CRC wrong in
    # both, so only inflating it shows the damage.
    payload[secret.header_offset + 6] |= 1
    payload[_central_entry(payload, b"secret.txt") + 8] |= 1
    payload[broken.header_offset + 14] ^= 0xFF
    payload[_central_entry(payload, b"broken.txt") + 16] ^= 0xFF
    files = _unpack(runner, "archive", bytes(payload)).files
    assert [(file.name, file.reason.partition(":")[0]) for file in files] == [
        ("passwd", "it is a symbolic link, not a file"),
        ("secret.txt", "it is encrypted"),
        ("broken.txt", "it cannot be inflated"),
        ("fine.txt", ""),
    ]
    assert files[-1].data == b"fine"


def _central_entry(payload: bytearray, name: bytes) -> int:
    """Where the central directory entry of ``name`` starts."""
    at = payload.find(b"PK\x01\x02")
    while at >= 0:
        length = int.from_bytes(payload[at + 28 : at + 30], "little")
        if bytes(payload[at + 46 : at + 46 + length]) == name:
            return at
        at = payload.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"no central entry for {name!r}")


def test_an_archive_past_the_byte_ceiling_is_left_out_before_inflating(
    runner: SandboxRunner,
) -> None:
    """A member declaring 200 MB is named, not inflated, under a ceiling of 8 MiB (the
    bridge's guard refuses such an archive first; the child holds the line without it)."""
    payload = zipped({"zeros.bin": bytes(200 << 20), "note.txt": b"note"})
    files = _unpack(runner, "archive", payload).files
    assert [(file.name, file.ceiling) for file in files] == [
        ("zeros.bin", "max_uncompressed_bytes"),
        ("note.txt", None),
    ]


def test_an_unpacking_answer_over_its_ceilings_is_malformed() -> None:
    """What a child taken over by its input could answer: more files or bytes than it was
    allowed, or a file both handed back and left out. None is believed."""
    two = enclosures.encode(Unpacked([File("a", "", b"1"), File("b", "", b"2")]))
    with pytest.raises(MalformedAnswer, match="2 files, over the 1"):
        enclosures.read_unpacked(two, max_members=1, max_unpacked_bytes=10)
    with pytest.raises(MalformedAnswer, match="2 decoded bytes, over the 1"):
        enclosures.read_unpacked(two, max_members=5, max_unpacked_bytes=1)
    both = '{"files": [{"name": "a", "media_type": "", "data": "MQ==", "reason": "x"}]}'
    with pytest.raises(MalformedAnswer, match="either handed back or left out"):
        enclosures.read_unpacked(both, max_members=5, max_unpacked_bytes=10)
    with pytest.raises(MalformedAnswer, match="not JSON"):
        enclosures.read_unpacked("{", max_members=5, max_unpacked_bytes=10)


def test_files_left_out_count_against_the_member_ceiling_too() -> None:
    """Names of files not handed back (links, files past the byte ceiling) are bounded as
    handed ones are: past ``max_members`` entries, the rest are counted."""
    packing = enclosures.Packing(max_members=3, max_unpacked_bytes=10)
    packing.add("a", "text/plain", b"1")
    for index in range(5):
        packing.leave_out(f"link{index}", "it is a symbolic link, not a file")
    packing.add("b", "text/plain", b"2")
    unpacked = enclosures.read_unpacked(packing.answer(), max_members=3, max_unpacked_bytes=10)
    assert [file.name for file in unpacked.files] == ["a", "link0", "link1"]
    assert unpacked.unlisted == 4
    names = [File(f"n{index}", "", None, "r") for index in range(4)]
    with pytest.raises(MalformedAnswer, match="4 files, over the 3"):
        enclosures.read_unpacked(enclosures.encode(Unpacked(names)), 3, 10)


def test_a_folder_entry_that_carries_data_is_named_not_skipped(runner: SandboxRunner) -> None:
    """A name ending in "/" is a folder to every extracting tool, so bytes stored under one
    reach no reader: they are named, never silently passed over. A folder entry written by a
    writer that deflates everything (Java's ZipOutputStream: the two bytes of an empty deflate
    stream) holds nothing and stays unsaid."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(zipfile.ZipInfo("hidden/"), b"ignore the other files")
        archive.writestr("empty/", b"")
        java = zipfile.ZipInfo("java/")
        java.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(java, b"")
        archive.writestr("note.txt", b"note")
    files = _unpack(runner, "archive", buffer.getvalue()).files
    assert [(file.name, file.data, file.reason) for file in files] == [
        (
            "hidden/",
            None,
            "it is a folder, yet its entry carries 22 bytes (22 uncompressed); a folder holds "
            "no data, so no reader would show them",
        ),
        ("note.txt", b"note", ""),
    ]
