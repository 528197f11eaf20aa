"""Every setting of the extraction service, read from the environment in this one place.

Each variable is documented in docs/configuration.md. A value that cannot be honoured (a hard
time limit under the sandbox's wall clock, a visibility timeout under the hard limit) is refused
at start-up, because each such mismatch silently breaks a guarantee: a task killed by Celery
before the sandbox's own limit reports the wrong reason, and a visibility timeout shorter than a
task hands the same job to a second worker while the first is still running it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bridge.knowledge.attachments import DEFAULT_LIMITS, ExtractionLimits
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, PIXELS
from bridge.knowledge.errors import BridgeContractError
from bridge.logs import LogFormat, requested_log_format
from bridge.metrics import metrics_port
from bridge.queue.admission import DEFAULT_MAX_QUEUED
from bridge.queue.jobs import QUEUES
from bridge.service.config import ServiceConfig, default_consumer
from bridge.service.schema import MAX_DEADLINE_SECONDS
from sandbox.jail import DEFAULT_UID_BASE
from sandbox.limits import MIB, ParseLimits, SandboxLimits
from sandbox.runner import mechanism_names

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
#: The deployments give the bridge service 9809, so it and a worker can share a host.
DEFAULT_METRICS_PORT = 9808
#: In TMPDIR: the one writable place of a worker container (a tmpfs or emptyDir).
_DEFAULT_HEARTBEAT_FILE = Path(tempfile.gettempdir()) / "airlock-worker.heartbeat"
# One pool process per core: OCR runs tesseract single-threaded (OMP_THREAD_LIMIT=1), so more
# processes than cores only make jobs wait on each other inside the sandbox's wall clock.
_CORES = os.cpu_count() or 1
_SANDBOX_DEFAULTS = SandboxLimits()


class ConfigurationError(ValueError):
    """An environment variable holds a value the service cannot run with."""


def _text(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, "").strip() or default


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(f"{name}={raw!r} must be a positive, finite number")
    return value


def _integer(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(f"{name}={raw!r} must be a positive integer")
    return int(raw)


_T = TypeVar("_T")


def _shared(parse: Callable[[Mapping[str, str]], _T], env: Mapping[str, str]) -> _T:
    """A variable whose parser the bridge service shares, its refusal as a ConfigurationError."""
    try:
        return parse(env)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(f"{name}={raw!r} must be one of 1/0, true/false, yes/no, on/off")


#: A MAC key shorter than this could be guessed; `openssl rand -hex 32` gives 64 digits.
_MIN_SECRET_HEX_DIGITS = 32


def _secret(env: Mapping[str, str], name: str) -> bytes | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        secret = bytes.fromhex(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be hexadecimal (openssl rand -hex 32)") from None
    if len(raw) < _MIN_SECRET_HEX_DIGITS:
        raise ConfigurationError(f"{name} must have at least {_MIN_SECRET_HEX_DIGITS} hex digits")
    return secret


def _sandbox_require(env: Mapping[str, str]) -> frozenset[str]:
    try:
        return mechanism_names(env.get("AIRLOCK_SANDBOX_REQUIRE", ""), "AIRLOCK_SANDBOX_REQUIRE")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def _uid_base(env: Mapping[str, str]) -> int:
    raw = env.get("AIRLOCK_SANDBOX_UID_BASE", "").strip()
    if not raw:
        return DEFAULT_UID_BASE
    if not raw.isdigit():
        raise ConfigurationError(f"AIRLOCK_SANDBOX_UID_BASE={raw!r} must be a uid (0 or more)")
    return int(raw)


def _extraction_limits(env: Mapping[str, str]) -> ExtractionLimits:
    """AIRLOCK_MAX_PAGES and the other ``ExtractionLimits`` variables (ceilings.py names
    them, and a refusal by a ceiling quotes the same names)."""
    values: dict[str, float] = {}
    for name, setting in EXTRACTION_SETTINGS.items():
        default = getattr(DEFAULT_LIMITS, name)
        read = _number if isinstance(default, float) else _integer
        values[name] = read(env, setting.variable, default)
    try:
        return ExtractionLimits(**values)  # type: ignore[arg-type]
    except BridgeContractError as exc:
        raise ConfigurationError(str(exc)) from None


def _bridge_service(env: Mapping[str, str], limits: ExtractionLimits) -> ServiceConfig:
    defaults = ServiceConfig(consumer="")
    return ServiceConfig(
        limits=limits,
        request_stream=_text(env, "AIRLOCK_REQUEST_STREAM", defaults.request_stream),
        result_stream=_text(env, "AIRLOCK_RESULT_STREAM", defaults.result_stream),
        group=_text(env, "AIRLOCK_BRIDGE_GROUP", defaults.group),
        consumer=_text(env, "AIRLOCK_BRIDGE_CONSUMER", default_consumer()),
        result_ttl=_integer(env, "AIRLOCK_RESULT_TTL", defaults.result_ttl),
        stream_maxlen=_integer(env, "AIRLOCK_RESULT_STREAM_MAXLEN", defaults.stream_maxlen),
        claim_idle_seconds=_number(env, "AIRLOCK_BRIDGE_CLAIM_IDLE", defaults.claim_idle_seconds),
        concurrency=_integer(env, "AIRLOCK_BRIDGE_CONCURRENCY", defaults.concurrency),
        max_request_bytes=_integer(
            env, "AIRLOCK_BRIDGE_MAX_REQUEST_MB", defaults.max_request_bytes // MIB
        )
        * MIB,
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
    """The service's configuration; :meth:`from_env` is the only reader of the environment."""

    broker_url: str = DEFAULT_BROKER_URL
    #: True when AIRLOCK_BROKER_URL was set: the CLI then extracts through the queue.
    broker_configured: bool = False
    result_backend: str = DEFAULT_BROKER_URL
    queues: tuple[str, ...] = QUEUES
    concurrency: int = _CORES
    sandbox: SandboxLimits = _SANDBOX_DEFAULTS
    ocr_language: str = "eng"
    #: ParseLimits.max_pixels: the largest decoded image, a memory budget of the deployment.
    max_pixels: int = ParseLimits().max_pixels
    #: AIRLOCK_MAX_PAGES and the other ExtractionLimits variables: the defaults of
    #: ``airlock extract``'s flags and the ceilings of ``airlock bridge``'s requests.
    extraction_limits: ExtractionLimits = DEFAULT_LIMITS
    #: Hand on text the sandbox finds unreadable, flagged, instead of refusing it.
    admit_unreadable: bool = False
    soft_time_limit: float = _SANDBOX_DEFAULTS.wall_seconds + 30
    hard_time_limit: float = _SANDBOX_DEFAULTS.wall_seconds + 60
    visibility_timeout: float = _SANDBOX_DEFAULTS.wall_seconds + 120
    restore_interval: float = 10.0
    result_expires: int = 3600
    payload_ttl: int = 3600
    max_deliveries: int = 3
    #: Jobs one queue may hold before callers are answered QueueFull (bridge.queue.admission).
    max_queued: int = DEFAULT_MAX_QUEUED
    result_cache: bool = True
    result_cache_ttl: int = 86400
    #: AIRLOCK_RESULT_CACHE_KEY: the workers' secret that MACs cache entries; no key, no cache.
    result_cache_key: bytes | None = field(default=None, repr=False)
    metrics_port: int = DEFAULT_METRICS_PORT
    #: None when AIRLOCK_LOG_FORMAT is unset: ``airlock worker`` then logs JSON, Celery's own
    #: command line plain text.
    log_format: LogFormat | None = None
    heartbeat_file: Path = _DEFAULT_HEARTBEAT_FILE
    heartbeat_seconds: float = 10.0
    bridge_service: ServiceConfig = field(default_factory=ServiceConfig)
    #: AIRLOCK_SANDBOX_REQUIRE: the layers without which the sandbox runs no job, checked here
    #: so a typo stops the worker at start.
    sandbox_require: frozenset[str] = frozenset()
    #: AIRLOCK_SANDBOX_UID_BASE: each jailed child runs as this plus its pid (as root).
    sandbox_uid_base: int = DEFAULT_UID_BASE

    def __post_init__(self) -> None:
        if not self.result_backend.startswith(("redis://", "rediss://", "unix://")):
            # Payloads, delivery counts and the result cache live beside the results: the
            # result backend must be a Redis the workers and the bridge can both reach.
            raise ConfigurationError("AIRLOCK_RESULT_BACKEND must be a redis:// URL")
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
            ParseLimits(ocr_language=self.ocr_language)
        except ValueError as exc:
            raise ConfigurationError(f"AIRLOCK_OCR_LANGUAGE: {exc}") from None
        _check_bridge_service(self.bridge_service)

    @property
    def parse_limits(self) -> ParseLimits:
        return self.parse_limits_for(self.extraction_limits)

    def parse_limits_for(self, limits: ExtractionLimits) -> ParseLimits:
        """The parse limits of a call with ``limits``: the parser's text budget follows the
        call's text ceiling, so raising ``max_text_chars`` (--max-chars, a job's limits)
        raises both; a budget left at the deployment's value would refuse the text anyway."""
        return ParseLimits(
            ocr_language=self.ocr_language,
            max_pixels=self.max_pixels,
            max_text_chars=limits.max_text_chars,
            admit_unreadable=self.admit_unreadable,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        broker_url = _text(env, "AIRLOCK_BROKER_URL", DEFAULT_BROKER_URL)
        wall = _number(env, "AIRLOCK_SANDBOX_WALL_SECONDS", _SANDBOX_DEFAULTS.wall_seconds)
        soft = _number(env, "AIRLOCK_TASK_SOFT_TIME_LIMIT", wall + 30)
        hard = _number(env, "AIRLOCK_TASK_TIME_LIMIT", soft + 30)
        limits = _extraction_limits(env)
        queues = tuple(
            name.strip()
            for name in _text(env, "AIRLOCK_QUEUES", ",".join(QUEUES)).split(",")
            if name.strip()
        )
        return cls(
            broker_url=broker_url,
            broker_configured=bool(env.get("AIRLOCK_BROKER_URL", "").strip()),
            result_backend=_text(env, "AIRLOCK_RESULT_BACKEND", broker_url),
            queues=queues,
            concurrency=_integer(env, "AIRLOCK_CONCURRENCY", _CORES),
            sandbox=SandboxLimits(
                memory_bytes=_integer(
                    env, "AIRLOCK_SANDBOX_MEMORY_MB", _SANDBOX_DEFAULTS.memory_bytes // MIB
                )
                * MIB,
                cpu_seconds=_integer(
                    env, "AIRLOCK_SANDBOX_CPU_SECONDS", _SANDBOX_DEFAULTS.cpu_seconds
                ),
                wall_seconds=wall,
                output_bytes=_integer(
                    env, "AIRLOCK_SANDBOX_OUTPUT_BYTES", _SANDBOX_DEFAULTS.output_bytes
                ),
            ),
            ocr_language=_text(env, "AIRLOCK_OCR_LANGUAGE", "eng"),
            max_pixels=_integer(env, PIXELS.variable, ParseLimits().max_pixels),
            extraction_limits=limits,
            admit_unreadable=_flag(env, "AIRLOCK_ADMIT_UNREADABLE", False),
            soft_time_limit=soft,
            hard_time_limit=hard,
            visibility_timeout=_number(env, "AIRLOCK_VISIBILITY_TIMEOUT", hard + 60),
            restore_interval=_number(env, "AIRLOCK_RESTORE_INTERVAL", 10.0),
            result_expires=_integer(env, "AIRLOCK_RESULT_EXPIRES", 3600),
            payload_ttl=_integer(env, "AIRLOCK_PAYLOAD_TTL", 3600),
            max_deliveries=_integer(env, "AIRLOCK_MAX_DELIVERIES", 3),
            max_queued=_integer(env, "AIRLOCK_MAX_QUEUED", DEFAULT_MAX_QUEUED),
            result_cache=_flag(env, "AIRLOCK_RESULT_CACHE", True),
            result_cache_ttl=_integer(env, "AIRLOCK_RESULT_CACHE_TTL", 86400),
            result_cache_key=_secret(env, "AIRLOCK_RESULT_CACHE_KEY"),
            metrics_port=_shared(lambda e: metrics_port(e, DEFAULT_METRICS_PORT), env),
            log_format=_shared(requested_log_format, env),
            heartbeat_file=Path(_text(env, "AIRLOCK_HEARTBEAT_FILE", str(_DEFAULT_HEARTBEAT_FILE))),
            heartbeat_seconds=_number(env, "AIRLOCK_HEARTBEAT_SECONDS", 10.0),
            bridge_service=_bridge_service(env, limits),
            sandbox_require=_sandbox_require(env),
            sandbox_uid_base=_uid_base(env),
        )
