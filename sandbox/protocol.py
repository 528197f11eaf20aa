"""The bytes that cross the pipe between the parent and a jailed child: length-prefixed frames.

JSON and plain values only, strictly checked: nothing richer than strings and bounded
integers may come back from a process an attacker's bytes may have taken over.
See docs/sandbox.md, "Shape" (Protocol).
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass, fields
from typing import Any, NoReturn

import msgspec

from sandbox import codes, document
from sandbox.document import Document
from sandbox.errors import MalformedAnswer
from sandbox.limits import ParseLimits

LENGTH = struct.Struct("!I")
MAX_HEADER_BYTES = 64 * 1024
MAX_REASON_CHARS = 1000
MAX_TYPE_CHARS = 100
# Page and progress counts above this are lies: no page ceiling comes near it. The digits are
# counted before any conversion, so a forged 5,000-digit count costs a length check, not a
# quadratic conversion or Python's bare "exceeds the limit for integer string conversion".
MAX_COUNT = 1_000_000
_MAX_COUNT_DIGITS = len(str(MAX_COUNT))

# A JSON escape can smuggle a lone surrogate past strict UTF-8 decoding; no valid text has one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``: a pipe may take a large frame in several writes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@dataclass(frozen=True)
class JobHeader:
    kind: str
    media_type: str
    limits: ParseLimits


def encode_job_header(header: JobHeader) -> bytes:
    """The framed header; the payload follows it as a second frame."""
    body = json.dumps(
        {
            "kind": header.kind,
            "media_type": header.media_type,
            "limits": {f.name: getattr(header.limits, f.name) for f in fields(ParseLimits)},
        }
    ).encode()
    if len(body) > MAX_HEADER_BYTES:
        # The kind and media type come from a caller; a megabyte "media type" is refused here
        # rather than making the child buffer it before the payload.
        raise ValueError("the job header exceeds 64 KiB")
    return frame(body)


def decode_job_header(body: bytes) -> JobHeader:
    """Parse the header the parent wrote (trusted side, but checked: a bug must not misparse)."""
    value = json.loads(body)
    if not isinstance(value, dict) or set(value) != {"kind", "media_type", "limits"}:
        raise ValueError("malformed job header")
    kind, media_type, limits = value["kind"], value["media_type"], value["limits"]
    if not isinstance(kind, str) or not isinstance(media_type, str) or not isinstance(limits, dict):
        raise ValueError("malformed job header")
    return JobHeader(kind, media_type, ParseLimits(**limits))


@dataclass(frozen=True)
class TextAnswer:
    text: str
    pages: int | None


@dataclass(frozen=True)
class DocumentAnswer:
    document: Document
    pages: int | None


@dataclass(frozen=True)
class ErrorAnswer:
    code: str
    type_name: str
    reason: str


@dataclass(frozen=True)
class Progress:
    done: int
    total: int


def encode_progress(done: int, total: int) -> bytes:
    return frame(json.dumps({"progress": [done, total]}).encode())


# Exactly the bytes ``encode_progress`` writes. A child may send one progress frame per 24 bytes
# of its answer budget, so the parent recognises them with one match rather than a JSON parse
# each; any other body that claims to be progress is malformed.
_COUNT = rb"(0|[1-9][0-9]{0,%d})" % (_MAX_COUNT_DIGITS - 1)
_PROGRESS_FRAME = re.compile(rb'\{"progress": \[' + _COUNT + rb", " + _COUNT + rb"\]\}")


def encode_text_answer(text: str, pages: int | None) -> bytes:
    """The answer of a kind that answers parts of a document (sandbox/pages.py), not one."""
    return _success({"ok": True, "text": text, "pages": pages})


def encode_document_answer(answer: Document, pages: int | None) -> bytes:
    """The answer of a kind that answers a document, held to the schema the parent holds it
    to first: a parser's value out of bounds is its error, not an answer the parent would
    take for a compromised child's (``msgspec.ValidationError``, reported as a parser error)."""
    plain = msgspec.to_builtins(answer)
    msgspec.convert(plain, Document, strict=True)
    return _success({"ok": True, "document": plain, "pages": pages})


def _success(answer: dict[str, object]) -> bytes:
    body = json.dumps(answer, ensure_ascii=False)
    # A lone surrogate from a broken font map is not encodable as UTF-8; replace it here so the
    # parent can insist on strict UTF-8 and reject everything else as malformed.
    clean = body.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return frame(clean.encode())


def encode_error_answer(code: str, type_name: str, reason: str) -> bytes:
    reason = reason[:MAX_REASON_CHARS].encode("utf-8", "replace").decode("utf-8")
    return frame(
        json.dumps(
            {"ok": False, "code": code, "type": type_name[:MAX_TYPE_CHARS], "reason": reason}
        ).encode()
    )


def _malformed(why: str) -> NoReturn:
    raise MalformedAnswer(f"the child's answer is malformed: {why}")


# These strict-JSON hooks repeat bridge/wire.py's on purpose: sandbox imports nothing of
# bridge (docs/architecture.md), so each side of the boundary holds its own copy.
def _reject_constant(name: str) -> NoReturn:
    _malformed(f"it contains the non-JSON constant {name}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        # Two "ok" keys would let the first parser that reads the answer and the last one
        # disagree about what it says.
        _malformed("it repeats a key")
    return dict(pairs)


def _clean_string(untrusted_value: object, name: str, limit: int | None) -> str:
    if not isinstance(untrusted_value, str):
        _malformed(f"{name} is not a string")
    if limit is not None and len(untrusted_value) > limit:
        _malformed(f"{name} is longer than {limit} characters")
    if _SURROGATE.search(untrusted_value):
        _malformed(f"{name} contains a lone surrogate")
    return untrusted_value


def _bounded_int(untrusted_digits: str) -> int:
    if len(untrusted_digits.lstrip("-")) > _MAX_COUNT_DIGITS:
        _malformed(f"an integer has more than {_MAX_COUNT_DIGITS} digits")
    return int(untrusted_digits)


def _count(untrusted_value: object, name: str) -> int:
    if type(untrusted_value) is not int or not 0 <= untrusted_value <= MAX_COUNT:
        _malformed(f"{name} is not an integer from 0 to {MAX_COUNT}")
    return untrusted_value


def decode_progress(untrusted_body: bytes) -> Progress | None:
    """The progress a frame reports, or None when the frame is not a progress frame."""
    match = _PROGRESS_FRAME.fullmatch(untrusted_body)
    if match is None:
        return None
    done, total = (_count(int(digits), "a progress count") for digits in match.groups())
    if done > total:
        _malformed(f"progress reports {done} done of {total}")
    return Progress(done, total)


def decode_answer(
    untrusted_body: bytes, *, parts: bool
) -> TextAnswer | DocumentAnswer | ErrorAnswer:
    """Validate the answer frame strictly: exact keys, exact types, strict UTF-8 and JSON; a
    success is a document, or text for a job whose kind answers ``parts`` of one.

    Every way it can fail is ``MalformedAnswer``, including the ValueError paths inside
    ``json.loads`` (an integer too long to convert, for one).
    """
    try:
        untrusted_text = untrusted_body.decode("utf-8")
        untrusted_answer = json.loads(
            untrusted_text,
            object_pairs_hook=_unique_keys,
            parse_constant=_reject_constant,
            parse_int=_bounded_int,
        )
    except (ValueError, OverflowError, RecursionError) as exc:  # UnicodeDecodeError included
        _malformed(f"{type(exc).__name__}: {exc}")
    if not isinstance(untrusted_answer, dict):
        _malformed("it is not a JSON object")
    if "progress" in untrusted_answer:
        _malformed('a progress frame must be exactly {"progress": [done, total]} as encoded')
    untrusted_ok = untrusted_answer.get("ok")
    if untrusted_ok is True:
        # A kind answers its one shape: text in place of a document would carry lines no
        # renderer quoted (a forged page marker) past the schema.
        body = "text" if parts else "document"
        if set(untrusted_answer) != {"ok", body, "pages"}:
            _malformed(f"a success answer must have exactly the keys ok, {body}, pages")
        untrusted_pages = untrusted_answer["pages"]
        pages = None if untrusted_pages is None else _count(untrusted_pages, "pages")
        if body == "document":
            return DocumentAnswer(_document(untrusted_answer["document"]), pages)
        return TextAnswer(_clean_string(untrusted_answer["text"], "text", None), pages)
    if untrusted_ok is False:
        if set(untrusted_answer) != {"ok", "code", "type", "reason"}:
            _malformed("an error answer must have exactly the keys ok, code, type, reason")
        code = _clean_string(untrusted_answer["code"], "code", MAX_TYPE_CHARS)
        if code not in codes.ALL:
            _malformed(f"unknown error code {code!r}")
        type_name = _clean_string(untrusted_answer["type"], "type", MAX_TYPE_CHARS)
        if not type_name.isidentifier():
            _malformed("type is not an identifier")
        reason = _clean_string(untrusted_answer["reason"], "reason", MAX_REASON_CHARS)
        return ErrorAnswer(code, type_name, printable(reason))
    _malformed("ok is neither true nor false")


def _document(untrusted_value: object) -> Document:
    """The answer's document, held to the schema: known blocks with exactly their fields, in
    their bounds (sandbox/document.py), every string free of lone surrogates."""
    try:
        answer = msgspec.convert(untrusted_value, Document, strict=True)
    except msgspec.ValidationError as exc:
        _malformed(f"its document does not hold to the schema: {exc}")
    except UnicodeError:  # a lone surrogate in a key or a tag, quoted in the error message
        _malformed("its document contains a lone surrogate")
    for text in document.strings(answer):
        if _SURROGATE.search(text):
            _malformed("its document contains a lone surrogate")
    return answer


def printable(untrusted_reason: str) -> str:
    """Escape control characters so a parser's message cannot forge log lines or terminals."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in untrusted_reason)


@dataclass(frozen=True)
class Ready:
    """What a freshly jailed child reports before it waits for a job: the layers it holds."""

    mechanisms: frozenset[str]


def encode_ready(mechanisms: frozenset[str]) -> bytes:
    return frame(json.dumps({"ready": sorted(mechanisms)}).encode())


def decode_ready(body: bytes) -> Ready:
    value = json.loads(body)
    if (
        not isinstance(value, dict)
        or set(value) != {"ready"}
        or not isinstance(value["ready"], list)
        or not all(isinstance(name, str) for name in value["ready"])
    ):
        raise ValueError("malformed ready message")
    return Ready(frozenset(value["ready"]))
