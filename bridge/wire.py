"""The one strict decoder for what the bridge reads off Redis: jobs, answers and requests.

Strict JSON first (no duplicate keys, no NaN), then msgspec types with exact keys, exact types
and bounds; the same types generate the JSON Schemas in docs/schemas/. See docs/queue.md
(The trust boundaries) and docs/bridge-service.md (Requests).
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, Meta

from bridge.knowledge.attachments import DEFAULT_LIMITS
from bridge.knowledge.labels import MAX_LABEL_CHARS

T = TypeVar("T")

#: Kind and media type are quoted into reasons and routed on; a declared string longer than
#: this is refused as a malformed message rather than carried further. The bridge never
#: publishes longer ones (it drops such a ref with a reason instead).
MAX_DECLARED_CHARS = 1024

# msgspec matches a pattern with Python's ``re.search``, whose ``$`` also matches before a
# final newline; the length bound refuses the 65th character that pattern would let through.
Sha256Hex = Annotated[
    str,
    Meta(
        pattern="^[0-9a-f]{64}$",
        max_length=64,
        description="SHA-256 of the bytes, lowercase hex.",
    ),
]
Declared = Annotated[
    str,
    Meta(
        max_length=MAX_DECLARED_CHARS,
        description="Untrusted: labels are sanitised, kinds and media types are routing hints.",
    ),
]
#: The bridge sends ``safe_label`` output; a longer label can only be forged.
Label = Annotated[str, Meta(max_length=MAX_LABEL_CHARS)]

_OCR_MODEL_CHARS = 32
_OCR_MODELS_TOGETHER = 4
_OCR_CHOICES = 4
#: One tesseract model's name. A letter or digit first: "_" alone names no model, and the
#: sandbox's own check refused it after the request had been accepted (a 500 at the door,
#: found by Schemathesis).
OCR_MODEL = f"[A-Za-z0-9][A-Za-z0-9_]{{0,{_OCR_MODEL_CHARS - 1}}}"
_OCR_CHOICE = rf"{OCR_MODEL}(?:\+{OCR_MODEL}){{0,{_OCR_MODELS_TOGETHER - 1}}}"
#: tesseract languages a request reads its scans with, in AIRLOCK_OCR_LANGUAGE's form. The name
#: reaches tesseract's command line, so only model names may: never an option or a path. Each
#: model read at once costs its memory and time again, and each choice may cost a page another
#: reading, so a choice joins at most four models and at most four choices are tried (eight
#: choices of four models cost 24 CPU-s a page against 2 for eng,scripts). The first is what
#: every page is read with, so it cannot be ``scripts`` (the models a page it reads badly is
#: read again with), which joins no other model either; ``osd`` detects scripts and reads
#: nothing. The first look-ahead refuses a final newline, which ``$`` lets by.
OcrLanguage = Annotated[
    str,
    Meta(
        pattern=(
            r"^(?!.*\n)(?!scripts(?:,|$))(?!(?:.*[+,])?osd(?:[+,]|$))"
            r"(?!(?:.*[+,])?scripts\+)(?!.*\+scripts(?:[+,]|$))"
            rf"{_OCR_CHOICE}(?:,{_OCR_CHOICE}){{0,{_OCR_CHOICES - 1}}}$"
        ),
        max_length=_OCR_CHOICES * (_OCR_MODELS_TOGETHER * (_OCR_MODEL_CHARS + 1)) - 1,
        description=(
            "The tesseract languages to read scans with, instead of the service's "
            "AIRLOCK_OCR_LANGUAGE: a model ('deu'), models read together ('eng+deu'), or "
            "choices separated by commas, tried in order by the script tesseract sees "
            "('eng,jpn'); 'scripts' stands for every script model the workers have. A "
            "language the workers lack fails the files that need OCR, naming its Debian "
            "package."
        ),
        examples=["eng", "deu+eng", "eng,scripts"],
    ),
]

_INDEX = re.compile(r"\[\d+\]")


class WireError(ValueError):
    """A document refused by the decoder: what is wrong (``detail``) and where (``path``)."""

    def __init__(self, detail: str, path: str = "") -> None:
        super().__init__(f"{path or 'the document'}: {detail}")
        self.detail = detail
        self.path = path

    @property
    def field(self) -> str:
        """The path without list indices (``attachments[].label``), to look a rule up by."""
        return _INDEX.sub("[]", self.path)


# sandbox/protocol.py repeats these strict-JSON hooks on purpose: sandbox imports nothing of
# bridge (docs/architecture.md), so it cannot share them.
def _unique_keys(untrusted_pairs: list[tuple[str, object]]) -> dict[str, object]:
    # Parsers disagree on which of two equal keys wins (Python's and msgspec's keep the last,
    # others the first), so a document that repeats one means different things to each.
    untrusted_object = dict(untrusted_pairs)
    if len(untrusted_object) != len(untrusted_pairs):
        raise WireError("repeats a key in one object")
    return untrusted_object


def _no_constants(name: str) -> object:
    raise WireError(f"has {name}, which is not a JSON number")


def _schema_number(text: str) -> float | int:
    # JSON Schema's integer is any number without a fractional part: 5.0 is one.
    value = float(text)
    return int(value) if value.is_integer() else value


_STRICT = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constants)
_STRICT_SCHEMA = json.JSONDecoder(
    object_pairs_hook=_unique_keys, parse_constant=_no_constants, parse_float=_schema_number
)


def parse_json(untrusted_raw: bytes, *, schema_integers: bool = False) -> object:
    """Strict UTF-8 JSON into plain values, or :class:`WireError` (``detail`` says why).

    ``schema_integers`` reads a number without a fractional part as an integer, as JSON Schema
    does, for documents whose published schema is the contract.
    """
    try:
        text = untrusted_raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("is not UTF-8") from None
    try:
        return (_STRICT_SCHEMA if schema_integers else _STRICT).decode(text)
    except WireError:
        raise
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
        raise WireError("is not a JSON document") from None


#: :data:`OcrLanguage`'s rule as a refusal words it.
OCR_LANGUAGE_RULE = (
    "tesseract language names: one model 'deu', models read together 'eng+deu' (at most "
    f"{_OCR_MODELS_TOGETHER}), or choices tried in order 'eng,scripts' (at most {_OCR_CHOICES}; "
    "'scripts' neither first nor joined with '+'; not 'osd')"
)


def ocr_language_problem(ocr_language: str) -> str | None:
    """Why ``ocr_language`` is not one a request may name (:data:`OcrLanguage`), or None."""
    try:
        decode(ocr_language, OcrLanguage)
    except WireError:
        return f"{ocr_language!r} is not {OCR_LANGUAGE_RULE}"
    return None


def decode(untrusted: object, into: type[T], *, from_text: bool = False) -> T:
    """Plain values held to a msgspec type: exact keys, exact types (no bool for an int, no
    string for a number), every bound; or :class:`WireError` naming the first field refused.

    ``from_text``: the values are strings that stand for numbers (an HTTP query), read as
    the type asks; nothing else is loosened.
    """
    try:
        return msgspec.convert(untrusted, into, strict=not from_text)
    except msgspec.ValidationError as exc:
        detail, at, where = str(exc).partition(" - at `$")
        raise WireError(detail, where.rstrip("`").lstrip(".") if at else "") from None


def limits_struct(name: str, *, partial: bool) -> type[msgspec.Struct]:
    """ExtractionLimits on the wire, built from its fields so a new limit needs no second list.

    Every limit is positive (integers whole). ``partial``: each field may be left out, and the
    schema names the default ceiling as the most a request may ask for.
    """
    members: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for field in fields(DEFAULT_LIMITS):
        default = getattr(DEFAULT_LIMITS, field.name)
        bound = Meta(gt=0) if type(default) is float else Meta(ge=1)
        shown = Meta(extra_json_schema={"maximum": default}) if partial else Meta()
        rule = Annotated[type(default), bound, shown]  # type: ignore[valid-type]
        members.append((field.name, rule, UNSET) if partial else (field.name, rule))
    return msgspec.defstruct(name, members, forbid_unknown_fields=True, kw_only=True)


def json_schema(root: object, *, title: str, description: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of a msgspec type, its root object written out in place."""
    generated = msgspec.json.schema(root)
    definitions: dict[str, Any] = generated.pop("$defs")
    body = definitions.pop(generated.pop("$ref").rsplit("/", 1)[1])
    body.pop("title", None)
    body.pop("description", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": description,
        **body,
        **generated,
        **({"$defs": definitions} if definitions else {}),
    }
