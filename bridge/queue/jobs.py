"""The job message: what the bridge publishes for one attachment and what a worker accepts.

The message carries a claim check (payload key, size, SHA-256), never the bytes, and only plain
JSON values. A worker reads it as untrusted: anyone who can write to the broker can publish a
message, so :func:`job_from_wire` checks the exact key set and every type before anything uses
a field, and the limits are rebuilt through :class:`ExtractionLimits`' own validation.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from enum import StrEnum

from kombu.entity import Exchange, Queue

from bridge.knowledge.attachments import ExtractionLimits
from bridge.knowledge.labels import MAX_LABEL_CHARS

#: The one task name both sides agree on; a rename is a protocol change.
TASK_NAME = "airlock.extract"

#: Text, PDF and DOCX jobs take milliseconds to seconds; OCR takes seconds per page. Separate
#: queues keep a burst of scans from starving quick documents behind them, and let operators
#: give OCR its own machines.
LIGHT_QUEUE = "airlock.light"
OCR_QUEUE = "airlock.ocr"
QUEUES = (LIGHT_QUEUE, OCR_QUEUE)

#: Kinds whose every job needs OCR. A PDF starts on the light queue and is handed on to the
#: OCR queue only when one of its pages turns out to have no text layer.
_OCR_KINDS = frozenset({"image"})

_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")

#: Kind and media type are quoted into reasons and routed on; a declared string longer than
#: this is refused as a malformed message rather than carried further. The bridge never
#: publishes longer ones (it drops such a ref with a reason instead).
MAX_DECLARED_CHARS = 1024

_PAYLOAD_KEY_PREFIX = "airlock:payload:"


class Stage(StrEnum):
    """Which pass a job is in: the light pass (no OCR) or the OCR pass."""

    LIGHT = "light"
    OCR = "ocr"


def first_stage(kind: str) -> Stage:
    """The stage a new job of this kind starts in."""
    return Stage.OCR if kind in _OCR_KINDS else Stage.LIGHT


def queue_for(stage: Stage) -> str:
    return OCR_QUEUE if stage is Stage.OCR else LIGHT_QUEUE


def payload_key(sha256: str) -> str:
    """The Redis key of a payload: derived from its hash, never chosen by a message."""
    return _PAYLOAD_KEY_PREFIX + sha256


def wire_settings() -> dict[str, object]:
    """The Celery settings both ends must share.

    JSON only, both ways: a pickled message is code execution for anyone who can publish to
    the broker, and a pickled result is the same for anyone who can write to the backend.
    """
    return {
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_routes": (route,),
        # Declared alike on both ends, so publisher and consumer bind the same exchange.
        "task_queues": [
            Queue(name, Exchange(name, type="direct"), routing_key=name)  # type: ignore[no-untyped-call]
            for name in QUEUES
        ],
    }


def route(
    name: str, args: object, kwargs: object, options: object, task: object = None, **_: object
) -> dict[str, str] | None:
    """Celery router: a job goes to the queue of its stage (light, or OCR for images)."""
    if name != TASK_NAME or not isinstance(args, list | tuple) or len(args) != 1:
        return None
    (untrusted_job,) = args
    is_ocr = isinstance(untrusted_job, dict) and untrusted_job.get("stage") == Stage.OCR.value
    return {"queue": queue_for(Stage.OCR if is_ocr else Stage.LIGHT)}


class MalformedJob(ValueError):
    """A message that is not a job this version publishes: forged, corrupted or from a stranger."""


@dataclass(frozen=True)
class ExtractionJob:
    """One attachment to extract, as the message describes it."""

    sha256: str
    size: int
    label: str
    kind: str
    media_type: str
    limits: ExtractionLimits
    stage: Stage
    use_cache: bool

    def to_wire(self) -> dict[str, object]:
        wire = asdict(self)
        wire["stage"] = self.stage.value
        return wire

    def handed_on(self, stage: Stage) -> ExtractionJob:
        return ExtractionJob(
            self.sha256,
            self.size,
            self.label,
            self.kind,
            self.media_type,
            self.limits,
            stage,
            self.use_cache,
        )


_JOB_KEYS = frozenset(field.name for field in fields(ExtractionJob))
_LIMIT_FIELDS = frozenset(field.name for field in fields(ExtractionLimits))


def _string(untrusted_job: dict[str, object], name: str, limit: int) -> str:
    untrusted_value = untrusted_job[name]
    if type(untrusted_value) is not str or len(untrusted_value) > limit:
        raise MalformedJob(f"job field {name!r} is not a string of at most {limit} characters")
    return untrusted_value


def _limits(untrusted_limits: object) -> ExtractionLimits:
    if type(untrusted_limits) is not dict or set(untrusted_limits) != set(_LIMIT_FIELDS):
        raise MalformedJob(f"job limits must have exactly the keys {sorted(_LIMIT_FIELDS)}")
    for name, untrusted_value in untrusted_limits.items():
        # JSON has one number type; an integer ceiling must arrive as an integer (not 1e9,
        # not true), and the ratio may arrive as either.
        allowed = (int, float) if name == "max_expansion_ratio" else (int,)
        if type(untrusted_value) not in allowed:
            raise MalformedJob(f"job limit {name!r} has the wrong type")
    try:
        return ExtractionLimits(**untrusted_limits)
    except Exception as exc:  # any refusal of ExtractionLimits is a malformed message here
        raise MalformedJob(f"job limits are invalid: {exc}") from exc


def job_from_wire(untrusted_job: object) -> ExtractionJob:
    """Validate a message body into a job, or raise :class:`MalformedJob`."""
    if type(untrusted_job) is not dict or set(untrusted_job) != _JOB_KEYS:
        raise MalformedJob(f"a job must be an object with exactly the keys {sorted(_JOB_KEYS)}")
    untrusted_sha256 = untrusted_job["sha256"]
    if type(untrusted_sha256) is not str or not _SHA256_HEX.match(untrusted_sha256):
        raise MalformedJob("job sha256 is not 64 lowercase hex digits")
    untrusted_size = untrusted_job["size"]
    if type(untrusted_size) is not int or untrusted_size < 1:
        raise MalformedJob("job size is not a positive integer")
    untrusted_stage = untrusted_job["stage"]
    if type(untrusted_stage) is not str or untrusted_stage not in {m.value for m in Stage}:
        raise MalformedJob("job stage is not a known stage")
    untrusted_use_cache = untrusted_job["use_cache"]
    if type(untrusted_use_cache) is not bool:
        raise MalformedJob("job use_cache is not a boolean")
    return ExtractionJob(
        sha256=untrusted_sha256,
        size=untrusted_size,
        # The bridge sends ``safe_label`` output; a longer label can only be forged.
        label=_string(untrusted_job, "label", MAX_LABEL_CHARS),
        kind=_string(untrusted_job, "kind", MAX_DECLARED_CHARS),
        media_type=_string(untrusted_job, "media_type", MAX_DECLARED_CHARS),
        limits=_limits(untrusted_job["limits"]),
        stage=Stage(untrusted_stage),
        use_cache=untrusted_use_cache,
    )
