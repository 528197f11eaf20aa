"""Every setting of the extraction service, read from the environment in this one place.

Each variable is one row of :data:`VARIABLES` (the setting it fills, its parser, its default,
each stated once) and one row of docs/configuration.md, which says why each constraint holds.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from bridge.knowledge.attachments import DEFAULT_LIMITS, ExtractionLimits
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, PIXELS
from bridge.knowledge.errors import BridgeContractError
from bridge.logs import LOG_FORMAT_VARIABLE, LogFormat, requested_log_format
from bridge.metrics import (
    DEFAULT_METRICS_HOST,
    METRICS_HOST_VARIABLE,
    METRICS_PORT_VARIABLE,
    metrics_host,
    metrics_port,
)
from bridge.queue.admission import DEFAULT_MAX_QUEUED
from bridge.queue.jobs import QUEUES
from bridge.redis_client import names_redis
from bridge.service.config import ServiceConfig, default_consumer
from bridge.service.schema import MAX_DEADLINE_SECONDS
from bridge.wire import OCR_MODEL
from sandbox import ocr_languages
from sandbox.jail import DEFAULT_UID_BASE
from sandbox.limits import MIB, ParseLimits, SandboxLimits
from sandbox.pages import DEFAULT_FAN_OUT_PAGES
from sandbox.runner import mechanism_names
from worker.door.config import DoorConfig, Network, networks

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
#: The worker's and the bridge's metrics ports when AIRLOCK_METRICS_PORT is unset: apart, so
#: the README's worker and bridge can run on one host (both once took 9808, and the second
#: started had none).
DEFAULT_METRICS_PORT = 9808
DEFAULT_BRIDGE_METRICS_PORT = 9809
#: In TMPDIR: the one writable place of a worker container (a tmpfs or emptyDir).
_DEFAULT_HEARTBEAT_FILE = Path(tempfile.gettempdir()) / "airlock-worker.heartbeat"
# One pool process per core: OCR runs tesseract single-threaded (OMP_THREAD_LIMIT=1), so more
# processes than cores only make jobs wait on each other inside the sandbox's wall clock.
_CORES = os.cpu_count() or 1
# The defaults their own modules state: the sandbox's, the parser's and the bridge service's.
_SANDBOX = SandboxLimits()
_PARSE = ParseLimits()
_SERVICE = ServiceConfig(consumer="")
_DOOR = DoorConfig()


class ConfigurationError(ValueError):
    """An environment variable holds a value the service cannot run with."""


def _text(name: str, raw: str) -> str:
    return raw


#: AIRLOCK_OCR_REQUEST_LANGUAGES's words for any model the host has, and for none at all.
_ANY_LANGUAGE = "any"
_NO_LANGUAGE = "none"
_MODEL_NAME = re.compile(OCR_MODEL)


def _request_languages(name: str, raw: str) -> frozenset[str] | None:
    """The models a request may name (None: any the host has; empty: none)."""
    words = raw.strip()
    if words == _ANY_LANGUAGE:
        return None
    if words == _NO_LANGUAGE:
        return frozenset()
    models = frozenset(part for part in re.split(r"[\s,+]+", words) if part)
    if (
        not models
        or models & {_ANY_LANGUAGE, _NO_LANGUAGE}
        or not all(_MODEL_NAME.fullmatch(model) for model in models)
    ):
        raise ConfigurationError(
            f"{name}={raw!r} must be {_ANY_LANGUAGE!r}, {_NO_LANGUAGE!r}, or tesseract model "
            "names separated by commas ('eng,deu,scripts')"
        )
    return models


def _number(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(f"{name}={raw!r} must be a positive, finite number")
    return value


def _integer(name: str, raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(f"{name}={raw!r} must be a positive integer")
    return int(raw)


def listening_port(name: str, raw: str) -> int:
    """A TCP port to listen on: 99999 was taken modulo 65536 by the kernel (34463), and 0
    would be a port nobody was told."""
    if not raw.isdigit() or not 1 <= int(raw) <= _LAST_PORT:
        raise ConfigurationError(f"{name}={raw!r} must be a port (1 to {_LAST_PORT})")
    return int(raw)


_LAST_PORT = 65535
#: A uid fits in 10 digits; a longer number is a typo, not a setting.
_MAX_COUNT_DIGITS = 10


def _count(name: str, raw: str) -> int:
    if not raw.isdigit() or len(raw) > _MAX_COUNT_DIGITS:
        raise ConfigurationError(f"{name}={raw!r} must be a whole number (0 or more)")
    return int(raw)


def _mebibytes(name: str, raw: str) -> int:
    return _integer(name, raw) * MIB


def _flag(name: str, raw: str) -> bool:
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(
        f"{name}={raw.lower()!r} must be one of 1/0, true/false, yes/no, on/off"
    )


def _names(name: str, raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _path(name: str, raw: str) -> Path:
    return Path(raw)


#: A MAC key shorter than this could be guessed; `openssl rand -hex 32` gives 64 digits.
_MIN_SECRET_HEX_DIGITS = 32


def _secret(name: str, raw: str) -> bytes:
    try:
        secret = bytes.fromhex(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be hexadecimal (openssl rand -hex 32)") from None
    if len(raw) < _MIN_SECRET_HEX_DIGITS:
        raise ConfigurationError(f"{name} must have at least {_MIN_SECRET_HEX_DIGITS} hex digits")
    return secret


# Parsers the bridge service shares (it reads the same variables without Settings).
def _port(name: str, raw: str) -> int:
    return metrics_port({name: raw}, DEFAULT_METRICS_PORT)


def _host(name: str, raw: str) -> str:
    return metrics_host({name: raw})


def _networks(name: str, raw: str) -> tuple[Network, ...]:
    try:
        return networks(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc} (comma-separated CIDR ranges)") from None


def _log_format(name: str, raw: str) -> LogFormat | None:
    return requested_log_format({name: raw})


def _mechanisms(name: str, raw: str) -> frozenset[str]:
    return mechanism_names(raw, name)


def _as_text(value: object) -> str:
    """A default another module states, as the text a variable would hold."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_T = TypeVar("_T")
#: The settings read so far, by ``setting``: what a rule for a default is computed from.
Read = Mapping[str, Any]


@dataclass(frozen=True)
class Variable(Generic[_T]):
    """One environment variable: the setting it fills, how its text is read, and its default.

    ``setting`` is a field of :class:`Settings`, or ``group.field`` for a field of one of its
    nested values. ``default`` is the text an unset variable is read as (checked like a given
    value), ``None`` for a setting absent when unset, or a rule over the settings read before.
    """

    setting: str
    name: str
    parse: Callable[[str, str], _T]
    default: str | Callable[[Read], _T] | None

    def read(self, env: Mapping[str, str], read: Read) -> _T | None:
        raw = env.get(self.name, "").strip()
        if not raw:
            if self.default is None:
                return None
            if callable(self.default):
                return self.default(read)
            raw = self.default
        try:
            return self.parse(self.name, raw)
        except ConfigurationError:
            raise
        except ValueError as exc:  # a shared parser's refusal, which names the variable
            raise ConfigurationError(str(exc)) from None


def _ceiling(name: str) -> Variable[float] | Variable[int]:
    default = getattr(DEFAULT_LIMITS, name)
    parse = _number if isinstance(default, float) else _integer
    return Variable(
        f"extraction_limits.{name}", EXTRACTION_SETTINGS[name].variable, parse, _as_text(default)
    )


#: Every variable, in the order it is read (a rule reads only the settings above it).
VARIABLES: tuple[Variable[Any], ...] = (
    Variable("broker_url", "AIRLOCK_BROKER_URL", _text, DEFAULT_BROKER_URL),
    Variable("result_backend", "AIRLOCK_RESULT_BACKEND", _text, lambda read: read["broker_url"]),
    #: Where the bridge service's clients connect: its inbox slots, streams and answers. A Redis
    #: of their own keeps clients' connections and memory out of the workers' Redis.
    Variable(
        "client_redis_url", "AIRLOCK_CLIENT_REDIS_URL", _text, lambda read: read["result_backend"]
    ),
    Variable("queues", "AIRLOCK_QUEUES", _names, ",".join(QUEUES)),
    Variable("concurrency", "AIRLOCK_CONCURRENCY", _integer, lambda _: _CORES),
    Variable(
        "sandbox.memory_bytes",
        "AIRLOCK_SANDBOX_MEMORY_MB",
        _mebibytes,
        _as_text(_SANDBOX.memory_bytes // MIB),
    ),
    Variable(
        "sandbox.cpu_seconds",
        "AIRLOCK_SANDBOX_CPU_SECONDS",
        _integer,
        _as_text(_SANDBOX.cpu_seconds),
    ),
    Variable(
        "sandbox.wall_seconds",
        "AIRLOCK_SANDBOX_WALL_SECONDS",
        _number,
        _as_text(_SANDBOX.wall_seconds),
    ),
    Variable(
        "sandbox.output_bytes",
        "AIRLOCK_SANDBOX_OUTPUT_BYTES",
        _integer,
        _as_text(_SANDBOX.output_bytes),
    ),
    Variable("ocr_language", "AIRLOCK_OCR_LANGUAGE", _text, f"eng,{ocr_languages.SCRIPTS}"),
    Variable(
        "ocr_request_languages",
        "AIRLOCK_OCR_REQUEST_LANGUAGES",
        _request_languages,
        _ANY_LANGUAGE,
    ),
    Variable(
        "admit_unreadable", "AIRLOCK_ADMIT_UNREADABLE", _flag, _as_text(_PARSE.admit_unreadable)
    ),
    Variable(
        "soft_time_limit",
        "AIRLOCK_TASK_SOFT_TIME_LIMIT",
        _number,
        lambda read: read["sandbox.wall_seconds"] + 30,
    ),
    Variable(
        "hard_time_limit",
        "AIRLOCK_TASK_TIME_LIMIT",
        _number,
        lambda read: read["soft_time_limit"] + 30,
    ),
    Variable(
        "visibility_timeout",
        "AIRLOCK_VISIBILITY_TIMEOUT",
        _number,
        lambda read: read["hard_time_limit"] + 60,
    ),
    Variable("restore_interval", "AIRLOCK_RESTORE_INTERVAL", _number, "10"),
    Variable("result_expires", "AIRLOCK_RESULT_EXPIRES", _integer, "3600"),
    Variable("payload_ttl", "AIRLOCK_PAYLOAD_TTL", _integer, "3600"),
    Variable("max_deliveries", "AIRLOCK_MAX_DELIVERIES", _integer, "3"),
    Variable("fan_out_pages", "AIRLOCK_FAN_OUT_PAGES", _count, str(DEFAULT_FAN_OUT_PAGES)),
    Variable("max_queued", "AIRLOCK_MAX_QUEUED", _integer, _as_text(DEFAULT_MAX_QUEUED)),
    Variable("result_cache", "AIRLOCK_RESULT_CACHE", _flag, "1"),
    Variable("result_cache_ttl", "AIRLOCK_RESULT_CACHE_TTL", _integer, "86400"),
    Variable("result_cache_key", "AIRLOCK_RESULT_CACHE_KEY", _secret, None),
    Variable("metrics_port", METRICS_PORT_VARIABLE, _port, None),
    Variable("metrics_host", METRICS_HOST_VARIABLE, _host, DEFAULT_METRICS_HOST),
    Variable("log_format", LOG_FORMAT_VARIABLE, _log_format, None),
    Variable("heartbeat_file", "AIRLOCK_HEARTBEAT_FILE", _path, lambda _: _DEFAULT_HEARTBEAT_FILE),
    Variable("heartbeat_seconds", "AIRLOCK_HEARTBEAT_SECONDS", _number, "10"),
    Variable(
        "bridge_service.request_stream", "AIRLOCK_REQUEST_STREAM", _text, _SERVICE.request_stream
    ),
    Variable(
        "bridge_service.result_stream", "AIRLOCK_RESULT_STREAM", _text, _SERVICE.result_stream
    ),
    Variable("bridge_service.group", "AIRLOCK_BRIDGE_GROUP", _text, _SERVICE.group),
    Variable(
        "bridge_service.consumer", "AIRLOCK_BRIDGE_CONSUMER", _text, lambda _: default_consumer()
    ),
    Variable(
        "bridge_service.result_ttl", "AIRLOCK_RESULT_TTL", _integer, _as_text(_SERVICE.result_ttl)
    ),
    Variable(
        "bridge_service.stream_maxlen",
        "AIRLOCK_RESULT_STREAM_MAXLEN",
        _integer,
        _as_text(_SERVICE.stream_maxlen),
    ),
    Variable(
        "bridge_service.claim_idle_seconds",
        "AIRLOCK_BRIDGE_CLAIM_IDLE",
        _number,
        _as_text(_SERVICE.claim_idle_seconds),
    ),
    Variable(
        "bridge_service.concurrency",
        "AIRLOCK_BRIDGE_CONCURRENCY",
        _integer,
        _as_text(_SERVICE.concurrency),
    ),
    Variable(
        "bridge_service.client_quota",
        "AIRLOCK_BRIDGE_CLIENT_QUOTA",
        _integer,
        _as_text(_SERVICE.client_quota),
    ),
    Variable(
        "bridge_service.max_request_bytes",
        "AIRLOCK_BRIDGE_MAX_REQUEST_MB",
        _mebibytes,
        _as_text(_SERVICE.max_request_bytes // MIB),
    ),
    *(_ceiling(name) for name in EXTRACTION_SETTINGS),
    #: ParseLimits.max_pixels: the largest decoded image, a memory budget of the deployment.
    Variable("max_pixels", PIXELS.variable, _integer, _as_text(_PARSE.max_pixels)),
    #: The layers without which the sandbox runs no job, checked here so a typo stops the
    #: worker at start; the composition root hands them to the sandbox.
    Variable("sandbox_require", "AIRLOCK_SANDBOX_REQUIRE", _mechanisms, ""),
    #: Each jailed child runs as this plus its pid (as root).
    Variable("sandbox_uid_base", "AIRLOCK_SANDBOX_UID_BASE", _count, _as_text(DEFAULT_UID_BASE)),
    Variable("http.host", "AIRLOCK_HTTP_HOST", _text, _DOOR.host),
    Variable("http.port", "AIRLOCK_HTTP_PORT", listening_port, _as_text(_DOOR.port)),
    Variable("http.keys_file", "AIRLOCK_HTTP_KEYS_FILE", _path, None),
    Variable("http.result_ttl", "AIRLOCK_HTTP_RESULT_TTL", _integer, _as_text(_DOOR.result_ttl)),
    Variable("http.max_jobs", "AIRLOCK_HTTP_MAX_JOBS", _integer, _as_text(_DOOR.max_jobs)),
    Variable(
        "http.key_max_jobs", "AIRLOCK_HTTP_KEY_MAX_JOBS", _integer, _as_text(_DOOR.key_max_jobs)
    ),
    Variable(
        "http.max_held_bytes",
        "AIRLOCK_HTTP_MAX_HELD_MB",
        _mebibytes,
        _as_text(_DOOR.max_held_bytes // MIB),
    ),
    Variable(
        "http.key_bytes_per_minute",
        "AIRLOCK_HTTP_KEY_MB_PER_MINUTE",
        _mebibytes,
        _as_text(_DOOR.key_bytes_per_minute // MIB),
    ),
    Variable("http.callback_allow", "AIRLOCK_HTTP_CALLBACK_ALLOW", _networks, ""),
    Variable(
        "http.body_idle_seconds",
        "AIRLOCK_HTTP_BODY_IDLE_SECONDS",
        _number,
        _as_text(_DOOR.body_idle_seconds),
    ),
)


def _read(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The settings ``env`` gives, and those of each nested value by its group."""
    read: dict[str, Any] = {}
    for variable in VARIABLES:
        read[variable.setting] = variable.read(env, read)
    flat = {key: value for key, value in read.items() if "." not in key}
    groups: dict[str, dict[str, Any]] = {}
    for key, value in read.items():
        if "." in key:
            group, name = key.split(".", 1)
            groups.setdefault(group, {})[name] = value
    return flat, groups


def _extraction_limits(values: Mapping[str, Any]) -> ExtractionLimits:
    try:
        return ExtractionLimits(**values)
    except BridgeContractError as exc:
        raise ConfigurationError(str(exc)) from None


def _check_redis_url(name: str, url: str, *, only_redis: bool) -> None:
    """Refuse a URL no party could follow (Redis Cluster, a Sentinel URL without its master's
    name) here, at start, rather than at the first job; ``only_redis``: and anything but Redis
    (payloads, delivery counts and the result cache live beside the results, in a Redis both
    the workers and the bridge reach)."""
    try:
        redis = names_redis(url)
    except BridgeContractError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None
    if only_redis and not redis:
        raise ConfigurationError(
            f"{name} must be a Redis URL: redis://, rediss://, unix:// or sentinel://"
        )


def _check_bridge_service(config: ServiceConfig) -> None:
    streams = {config.request_stream, config.result_stream, config.dead_letter_stream}
    if len(streams) != 3:
        # A result read back as a request would be answered as a malformed one, for ever.
        raise ConfigurationError("AIRLOCK_REQUEST_STREAM and AIRLOCK_RESULT_STREAM must differ")
    if config.result_ttl <= MAX_DEADLINE_SECONDS:
        raise ConfigurationError(
            f"AIRLOCK_RESULT_TTL must exceed the longest request deadline "
            f"({MAX_DEADLINE_SECONDS:g} s): a request run twice (its lease lost to a hung "
            "bridge) is answered once only while the first answer is still stored"
        )
    if config.claim_idle_seconds < 3:
        raise ConfigurationError(
            "AIRLOCK_BRIDGE_CLAIM_IDLE must be at least 3 seconds: leases are renewed every "
            "third of it, and a shorter one is lost by a live bridge on a Redis hiccup"
        )


@dataclass(frozen=True)
class Settings:
    """The service's configuration; :meth:`from_env` is the only reader of airlock's variables.

    Each field is filled by its :data:`VARIABLES` row (nested values by theirs), except
    ``broker_configured``: whether AIRLOCK_BROKER_URL was set, so the CLI extracts through the
    queue.
    """

    broker_url: str
    broker_configured: bool
    result_backend: str
    client_redis_url: str
    queues: tuple[str, ...]
    concurrency: int
    sandbox: SandboxLimits
    ocr_language: str
    #: The models a request's own OCR language may name: None for any the host has, empty for
    #: none (every scan is read with ``ocr_language``).
    ocr_request_languages: frozenset[str] | None
    max_pixels: int
    #: The defaults of ``airlock extract``'s flags and the ceilings of ``airlock bridge``'s
    #: requests.
    extraction_limits: ExtractionLimits
    #: Hand on text the sandbox finds unreadable, flagged, instead of refusing it.
    admit_unreadable: bool
    soft_time_limit: float
    hard_time_limit: float
    visibility_timeout: float
    restore_interval: float
    result_expires: int
    payload_ttl: int
    max_deliveries: int
    #: A scanned PDF of more pages than this has its OCR spread page by page over the OCR
    #: workers (worker.fanout); 0 never spreads one.
    fan_out_pages: int
    #: Jobs one queue may hold before callers are answered QueueFull (bridge.queue.admission).
    max_queued: int
    result_cache: bool
    result_cache_ttl: int
    #: The workers' secret that MACs cache entries; no key, no cache.
    result_cache_key: bytes | None = field(repr=False)
    #: AIRLOCK_METRICS_PORT, None when unset: each process then takes its own default
    #: (:meth:`worker_metrics_port`, :meth:`bridge_metrics_port`).
    metrics_port: int | None
    #: The address both listen on.
    metrics_host: str
    #: None when AIRLOCK_LOG_FORMAT is unset: ``airlock worker`` then logs JSON, Celery's own
    #: command line plain text.
    log_format: LogFormat | None
    heartbeat_file: Path
    heartbeat_seconds: float
    bridge_service: ServiceConfig
    #: ``airlock serve``'s own settings.
    http: DoorConfig
    sandbox_require: frozenset[str]
    sandbox_uid_base: int

    def __post_init__(self) -> None:
        _check_redis_url("AIRLOCK_BROKER_URL", self.broker_url, only_redis=False)
        _check_redis_url("AIRLOCK_RESULT_BACKEND", self.result_backend, only_redis=True)
        _check_redis_url("AIRLOCK_CLIENT_REDIS_URL", self.client_redis_url, only_redis=True)
        unknown = set(self.queues) - set(QUEUES)
        if not self.queues or unknown:
            raise ConfigurationError(f"AIRLOCK_QUEUES must name some of {list(QUEUES)}")
        if not self.sandbox.wall_seconds < self.soft_time_limit < self.hard_time_limit:
            raise ConfigurationError(
                "time limits must satisfy sandbox wall clock < soft limit < hard limit, so the "
                "sandbox's own limit (with its precise reason) always fires first"
            )
        if not self.visibility_timeout > self.hard_time_limit:
            raise ConfigurationError(
                "AIRLOCK_VISIBILITY_TIMEOUT must exceed the hard time limit, or a running task "
                "is handed to a second worker while the first still runs it"
            )
        if self.payload_ttl < self.hard_time_limit:
            raise ConfigurationError(
                "AIRLOCK_PAYLOAD_TTL must cover at least one full task, or a payload expires "
                "under the worker that is extracting it"
            )
        try:
            choices = ParseLimits(ocr_language=self.ocr_language).ocr_languages
        except ValueError as exc:
            raise ConfigurationError(f"AIRLOCK_OCR_LANGUAGE: {exc}") from None
        if choices[0] == ocr_languages.SCRIPTS:
            # Every page is read first with the first choice: the script models are what a
            # page that choice reads badly is read again with, so they cannot come first.
            raise ConfigurationError(
                f"AIRLOCK_OCR_LANGUAGE={self.ocr_language!r}: name a language before "
                f"{ocr_languages.SCRIPTS!r} (eng,{ocr_languages.SCRIPTS})"
            )
        _check_bridge_service(self.bridge_service)

    def refused_ocr_language(self, ocr_language: str | None) -> str | None:
        """Why this deployment will not read a request's scans in ``ocr_language``, or None.

        Each model a request adds costs every page it reads another tesseract run (four
        choices of four models cost a page several times the deployment's own), so an
        operator may hold requests to a list, or to the deployment's own languages alone."""
        allowed = self.ocr_request_languages
        if ocr_language is None or allowed is None:
            return None
        if not allowed:
            return (
                "this service reads scans with its own OCR languages only "
                "(AIRLOCK_OCR_REQUEST_LANGUAGES=none); ask without ocr_language"
            )
        named = ocr_languages.names(ocr_language.split(","))
        outside = [name for name in named if name not in allowed]
        if not outside:
            return None
        return (
            f"OCR language {', '.join(repr(name) for name in outside)} is not one a request may "
            f"name here (AIRLOCK_OCR_REQUEST_LANGUAGES: {', '.join(sorted(allowed))})"
        )

    @property
    def parse_limits(self) -> ParseLimits:
        return self.parse_limits_for(self.extraction_limits, ocr_language=None)

    def parse_limits_for(
        self, limits: ExtractionLimits, *, ocr_language: str | None
    ) -> ParseLimits:
        """The parse limits of a call with ``limits``: the parser's text budget follows the
        call's text ceiling, so raising ``max_text_chars`` (--max-chars, a job's limits)
        raises both; a budget left at the deployment's value would refuse the text anyway. An
        e-mail's or archive's unpacking is bounded by the call's member and decoded-byte
        ceilings, the ones its archive guard applies. ``ocr_language`` is the call's own
        (a request's), None for the deployment's; it has no default, so that no path that
        carries one can drop it."""
        return ParseLimits(
            ocr_language=ocr_languages.expanded(ocr_language or self.ocr_language),
            max_pixels=self.max_pixels,
            max_text_chars=limits.max_text_chars,
            max_members=limits.max_members,
            max_unpacked_bytes=limits.max_uncompressed_bytes,
            admit_unreadable=self.admit_unreadable,
            fan_out_pages=self.fan_out_pages,
        )

    @property
    def worker_metrics_port(self) -> int:
        """The worker's metrics port (0: none)."""
        return DEFAULT_METRICS_PORT if self.metrics_port is None else self.metrics_port

    @property
    def bridge_metrics_port(self) -> int:
        """The bridge service's metrics port (0: none)."""
        return DEFAULT_BRIDGE_METRICS_PORT if self.metrics_port is None else self.metrics_port

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        flat, groups = _read(env)
        limits = _extraction_limits(groups["extraction_limits"])
        return cls(
            **flat,
            broker_configured=bool(env.get("AIRLOCK_BROKER_URL", "").strip()),
            sandbox=SandboxLimits(**groups["sandbox"]),
            extraction_limits=limits,
            bridge_service=ServiceConfig(limits=limits, **groups["bridge_service"]),
            http=DoorConfig(**groups["http"]),
        )
