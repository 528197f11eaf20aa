"""``airlock``: extract files into one IngestSelection from the command line, and run the service.

Text goes to stdout, each omission with its reason to stderr. Exit codes: 0 every file admitted,
1 some omitted, 2 usage error, 3 the broker is unreachable; ``airlock health`` 0 healthy, 1 not.
See README.md and docs/operations.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from bridge import __version__
from bridge.knowledge.attachments import (
    DEFAULT_LIMITS,
    EXTRACTABLE_KINDS,
    AttachmentRef,
    ExtractionLimits,
    dropped_entry,
    over_byte_ceiling,
)
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, PIXELS
from bridge.knowledge.contracts import IngestSelection
from bridge.knowledge.errors import BridgeContractError, IngestionRejected
from bridge.queue.source import QueueUnavailable
from bridge.wire import ocr_language_problem
from sandbox.limits import ParseLimits
from worker.config import ConfigurationError, Settings, listening_port
from worker.selections import (
    QUEUED_DEADLINE_SECONDS,
    extract_locally,
    extract_queued,
    queue_client,
    selection_json,
    upload_ref,
)

if TYPE_CHECKING:
    from sandbox.doctor import DoctorReport

# Each command imports what only it needs (Celery, the sandbox's probes, the bridge service):
# `airlock --version` once took 0.6 CPU-s importing all of them.

EXIT_OK = 0
EXIT_OMITTED = 1
EXIT_UNHEALTHY = 1
EXIT_USAGE = 2
EXIT_BROKER = 3

#: The bridge's blocking reads last a second at most: a connection silent for this long is
#: broken, and the service retries on a new one.
_BRIDGE_REDIS_TIMEOUT_SECONDS = 10.0
#: How long ``airlock health --ready`` waits for the broker and the worker by default.
_HEALTH_TIMEOUT_SECONDS = 5.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airlock",
        description="Sandboxed extraction of untrusted uploads into bounded, labelled text.",
    )
    parser.add_argument("--version", action="version", version=f"airlock {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    extract = commands.add_parser(
        "extract",
        help="extract FILEs into one selection (text on stdout, omissions on stderr)",
        description="Extract FILEs in an isolated sandbox and print the assembled selection: "
        "text on stdout, one line per omitted file with its reason on stderr. A FILE that "
        "cannot be read is omitted with its reason like any other, and the others are still "
        f"extracted. '{STDIN_PATH}' reads standard input (labelled '{STDIN_LABEL}'). "
        "Exit 0 when every file was admitted, 1 when some were omitted, 2 on a usage error, "
        "3 when the broker is unreachable.",
    )
    extract.add_argument(
        "files", nargs="+", metavar="FILE", type=Path, help=f"a file to extract, or {STDIN_PATH}"
    )
    extract.add_argument("--json", action="store_true", help="print the whole selection as JSON")
    extract.add_argument(
        "--kind",
        choices=sorted(EXTRACTABLE_KINDS),
        help="declare every FILE as this kind instead of guessing from its name and bytes",
    )
    for name, setting in EXTRACTION_SETTINGS.items():
        default = getattr(DEFAULT_LIMITS, name)
        # --max-chars is the name the refusals of other tools taught people to look for.
        aliases = ["--max-chars"] if name == "max_text_chars" else []
        extract.add_argument(
            str(setting.flag),
            *aliases,
            dest=name,
            type=_above_zero(type(default)),
            metavar="N",
            help=f"ceiling: {setting.help} (default ${setting.variable}, else {default})",
        )

    extract.add_argument(
        "--admit-unreadable",
        action="store_true",
        help="admit text the sandbox finds unreadable (mojibake, OCR junk) under a first line "
        "'[airlock: text quality low: ...]' instead of omitting the file "
        "(local mode; default: $AIRLOCK_ADMIT_UNREADABLE)",
    )
    extract.add_argument(
        "--max-pixels",
        dest="max_pixels",
        type=int,
        metavar="N",
        help=f"ceiling: {PIXELS.help}, checked before it is decoded (local mode; default "
        f"${PIXELS.variable}, else {ParseLimits().max_pixels})",
    )
    extract.add_argument(
        "--ocr-language",
        metavar="LANGS",
        help="tesseract language(s): 'eng', 'eng+deu' (both models at once), or choices "
        "'deu,hin,scripts': every page is read with the first, a page it reads badly with the "
        "others that read the script detection sees; 'scripts' is every installed script model "
        "(default: $AIRLOCK_OCR_LANGUAGE or eng,scripts; the workers' own through the queue)",
    )
    extract.add_argument(
        "--broker",
        metavar="URL",
        help="extract through the queue at this broker (default: $AIRLOCK_BROKER_URL; "
        "unset: extract in this process's sandbox)",
    )
    extract.add_argument(
        "--deadline",
        type=_above_zero(float),
        default=QUEUED_DEADLINE_SECONDS,
        metavar="SECONDS",
        help=f"queue mode: omit files not answered within this time "
        f"(default {QUEUED_DEADLINE_SECONDS:g})",
    )
    extract.add_argument(
        "--no-cache",
        action="store_true",
        help="queue mode: parse again even when the result cache holds this file's text",
    )

    # Celery parses this command's arguments itself: main() hands them over unread.
    commands.add_parser(
        "worker",
        add_help=False,
        help="run a Celery worker for the extraction queues (arguments go to celery worker)",
        description="Start `celery worker` with the airlock app, consuming $AIRLOCK_QUEUES "
        "(default: airlock.light,airlock.ocr). Every argument is passed to Celery.",
    )

    commands.add_parser(
        "bridge",
        help="serve extraction requests from Redis (docs/bridge-service.md)",
        description="Take client tenants' requests from their inbox slots "
        "(airlock:tenant:<tenant>:in:0-7) into $AIRLOCK_REQUEST_STREAM (default "
        "airlock:requests), extract them on the workers, and publish each selection on the "
        "tenant's airlock:tenant:<tenant>:results and under "
        "airlock:tenant:<tenant>:selection:<request_id>. SIGTERM or SIGINT stops reading; the "
        "requests in flight are finished first. Exit 3 when Redis is unreachable at start.",
    )

    serve = commands.add_parser(
        "serve",
        help="serve the HTTP door: POST /v1/extract, jobs, Open WebUI's /process, /tika",
        description="Serve airlock over HTTP (docs/http.md): uploads in, selections out, the "
        "same as `airlock extract --json`. Files run in this process's sandbox, or through the "
        "queue when $AIRLOCK_BROKER_URL is set. Without $AIRLOCK_HTTP_KEYS_FILE it listens on "
        "loopback only. Exit 2 on a configuration error.",
    )
    serve.add_argument(
        "--host", help="address to listen on (default: $AIRLOCK_HTTP_HOST, else 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=_port,
        help="port to listen on, 1 to 65535 (default: $AIRLOCK_HTTP_PORT, else 8080)",
    )

    doctor = commands.add_parser(
        "doctor",
        help="report which sandbox mechanisms are active on this host",
        description="Probe the sandbox on this host by attacking it: a jailed child tries a "
        "TCP connect with every layer, then with each network layer alone. Prints the active "
        "mechanisms, the tesseract version and languages. Exit 1 when a mechanism named in "
        "AIRLOCK_SANDBOX_REQUIRE is missing or the connect was not blocked.",
    )
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")

    health_command = commands.add_parser(
        "health",
        help="probe this container: --live (cheap, local) or --ready (through the broker)",
        description="--live: exit 0 while this container's worker beats its heartbeat file "
        "($AIRLOCK_HEARTBEAT_FILE). --ready: exit 0 when the broker answers and, with --worker, "
        "when this container's worker answers a ping through it and a trivial job runs in "
        "this container's sandbox. Exit 1 otherwise.",
    )
    check = health_command.add_mutually_exclusive_group(required=True)
    check.add_argument("--live", action="store_true", help="the worker's main loop still turns")
    check.add_argument("--ready", action="store_true", help="the broker (and worker) answer")
    health_command.add_argument(
        "--worker",
        action="store_true",
        help="--ready: this container's worker must answer and its sandbox run a job too",
    )
    health_command.add_argument(
        "--timeout",
        type=float,
        default=_HEALTH_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"--ready: how long the broker and the worker may take "
        f"(default {_HEALTH_TIMEOUT_SECONDS:g})",
    )
    return parser


#: The command line's name for standard input, and the label its bytes are given.
STDIN_PATH = "-"
STDIN_LABEL = "stdin"


@dataclass(frozen=True)
class _Files:
    """The command line's files: those read, and those refused unread."""

    refs: list[AttachmentRef] = field(default_factory=list)
    #: ``IngestSelection.dropped`` entries of files over the byte ceiling or not readable.
    refused: list[tuple[str, str]] = field(default_factory=list)


def _open(path: Path) -> BinaryIO:
    # Standard input is not closed after reading: the caller's shell owns it.
    return os.fdopen(os.dup(0), "rb") if str(path) == STDIN_PATH else path.open("rb")


def _read_files(files: Sequence[Path], kind: str | None, limits: ExtractionLimits) -> _Files:
    """Read each file, but never more than one byte past ``max_bytes``: a 600 MB file held
    680 MB before its refusal, and ``/dev/zero`` took memory until the process died. A path
    that cannot be read is omitted with its reason like any other refused file: one typo in
    a batch of a hundred once cost the whole batch's exit status, and its --json said
    nothing of it."""
    read = _Files()
    if sum(1 for path in files if str(path) == STDIN_PATH) > 1:
        # The second read of standard input finds it spent: a file omitted as empty.
        raise ConfigurationError(f"{STDIN_PATH} (standard input) may be given once")
    for path in files:
        label = STDIN_LABEL if str(path) == STDIN_PATH else path.name
        try:
            with _open(path) as file:
                status = os.fstat(file.fileno())
                if stat.S_ISREG(status.st_mode) and status.st_size > limits.max_bytes:
                    refusal = over_byte_ceiling(label, status.st_size, limits)
                    read.refused.append(dropped_entry(label, refusal))
                    continue
                payload = file.read(limits.max_bytes + 1)
        except OSError as exc:
            unreadable = IngestionRejected(f"cannot read {path}: {exc.strerror or exc}")
            read.refused.append(dropped_entry(label, unreadable))
            continue
        if len(payload) > limits.max_bytes:  # a pipe or a device: no size known in advance
            refusal = over_byte_ceiling(label, len(payload), limits, at_least=True)
            read.refused.append(dropped_entry(label, refusal))
            continue
        read.refs.append(upload_ref(label, payload, kind))
    return read


class _Progress:
    """A one-line counter on stderr, shown only to a person watching a terminal: files done of
    total, and the pages of a long document as they are read (a 12-page scan once ran 17 s in
    silence). Pages are heard from the sandbox's threads, hence the lock."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self._total = total
        self._stream = stream
        self._enabled = stream.isatty()
        self._done = 0
        self._pages: tuple[int, int] | None = None
        self._shown = False
        self._lock = threading.Lock()

    def step(self) -> None:
        with self._lock:
            self._done = min(self._done + 1, self._total)
            self._pages = None
            self._show()

    def pages(self, done: int, total: int) -> None:
        """``on_progress`` of the sandbox: ``done`` pages of a document's ``total`` read."""
        with self._lock:
            self._pages = (done, total)
            self._show()

    def finish(self) -> None:
        """Every file is accounted for, including those refused before any worker saw them."""
        with self._lock:
            if self._done < self._total:
                self._done = self._total
                self._pages = None
                self._show()

    def _show(self) -> None:
        # One file without pages to count says nothing a person would wait for; once a line
        # is shown, it is brought to its end.
        if not self._enabled or (self._total < 2 and self._pages is None and not self._shown):
            return
        self._shown = True
        line = f"extracting {self._done}/{self._total}"
        if self._pages is not None:
            line += f", page {self._pages[0]}/{self._pages[1]}"
        end = "\n" if self._done == self._total else ""
        # The line is padded over what a longer line before it showed.
        self._stream.write(f"\r{line:<40}{end}")
        self._stream.flush()


def _print_selection(selection: IngestSelection, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(selection_json(selection))
    elif selection.text:
        sys.stdout.write(selection.text + "\n")
    for label, reason in selection.dropped:
        sys.stderr.write(f"airlock: omitted {label}: {reason}\n")


def _check_ocr_language(ocr_language: str, named_by: str) -> None:
    """Refuse at start an OCR language this host has no data for, naming its package."""
    from sandbox.doctor import uninstalled_ocr_language  # noqa: PLC0415

    problem = uninstalled_ocr_language(ocr_language)
    if problem is not None:
        raise ConfigurationError(f"{named_by}: {problem}")


def _extract(args: argparse.Namespace) -> int:
    if args.ocr_language is not None and (problem := ocr_language_problem(args.ocr_language)):
        raise ConfigurationError(f"--ocr-language: {problem}")
    env = dict(os.environ)
    if args.broker:
        env["AIRLOCK_BROKER_URL"] = args.broker
    if args.admit_unreadable:
        env["AIRLOCK_ADMIT_UNREADABLE"] = "1"
    if args.max_pixels is not None:
        env[PIXELS.variable] = str(args.max_pixels)
    settings = Settings.from_env(env)
    if settings.broker_configured and (args.admit_unreadable or args.max_pixels is not None):
        # Queued jobs carry only ExtractionLimits and an OCR language; the workers parse with
        # their own settings, and a flag that silently did nothing would be worse than a
        # refusal.
        raise ConfigurationError(
            "--admit-unreadable and --max-pixels apply to local extraction; the queue's "
            f"workers use their own AIRLOCK_ADMIT_UNREADABLE and {PIXELS.variable}"
        )
    if not settings.broker_configured and args.ocr_language:
        _check_ocr_language(args.ocr_language, "--ocr-language")
    elif not settings.broker_configured and "AIRLOCK_OCR_LANGUAGE" in env:
        _check_ocr_language(settings.ocr_language, "AIRLOCK_OCR_LANGUAGE")
    flags = {name: getattr(args, name) for name in EXTRACTION_SETTINGS}
    limits = replace(
        settings.extraction_limits,
        **{name: value for name, value in flags.items() if value is not None},
    )
    files = _read_files(args.files, args.kind, limits)
    refs = files.refs
    progress = _Progress(len(refs), sys.stderr)
    if settings.broker_configured:
        selection = extract_queued(
            refs,
            limits,
            settings,
            deadline=args.deadline,
            use_cache=not args.no_cache,
            ocr_language=args.ocr_language,
            on_file=progress.step,
            on_pages=progress.pages,
        )
    else:
        selection = extract_locally(
            refs,
            limits,
            settings,
            concurrency=settings.concurrency,
            ocr_language=args.ocr_language,
            on_file=progress.step,
            on_pages=progress.pages,
        )
    progress.finish()
    selection = replace(selection, dropped=(*files.refused, *selection.dropped))
    _print_selection(selection, args.json)
    return EXIT_OMITTED if selection.dropped else EXIT_OK


def _bridge(settings: Settings) -> int:
    from bridge.logs import LogFormat, configure  # noqa: PLC0415
    from bridge.metrics import QueueDepthCollector, serve_metrics  # noqa: PLC0415
    from bridge.redis_client import redis_client, refuse_cluster  # noqa: PLC0415
    from bridge.service.connections import held_connections  # noqa: PLC0415
    from bridge.service.server import BridgeService  # noqa: PLC0415

    configure(settings.log_format or LogFormat.JSON)
    stop = threading.Event()
    # The handler only sets the event: the loop then stops reading and drains, so a stop
    # never cuts a request between its extraction and its answer.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # Opened before anything else, and held: a client holding every other connection slot of
    # its Redis cannot keep the bridge out.
    redis = held_connections(
        settings.client_redis_url,
        settings.bridge_service.concurrency,
        _BRIDGE_REDIS_TIMEOUT_SECONDS,
    )
    refuse_cluster(settings.client_redis_url, _BRIDGE_REDIS_TIMEOUT_SECONDS)
    payloads = redis_client(settings.result_backend, timeout=_BRIDGE_REDIS_TIMEOUT_SECONDS)
    client = queue_client(settings)
    endpoint = (
        serve_metrics(
            settings.bridge_metrics_port,
            QueueDepthCollector(settings.broker_url),
            addr=settings.metrics_host,
        )
        if settings.bridge_metrics_port
        else None
    )
    try:
        BridgeService(redis, payloads, client, settings.bridge_service).run(stop)
    finally:
        if endpoint is not None:
            endpoint.close()
        client.close()
        redis.close()
        payloads.close()
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    import ipaddress  # noqa: PLC0415

    import uvicorn  # noqa: PLC0415

    from worker.door.app import create_app  # noqa: PLC0415
    from worker.door.keys import ApiKeys, KeysFileError  # noqa: PLC0415

    settings = Settings.from_env()
    if not settings.broker_configured:
        _check_ocr_language(settings.ocr_language, "AIRLOCK_OCR_LANGUAGE")
    host = args.host or settings.http.host
    port = settings.http.port if args.port is None else args.port
    try:
        keys = None if settings.http.keys_file is None else ApiKeys.load(settings.http.keys_file)
    except KeysFileError as exc:
        raise ConfigurationError(f"AIRLOCK_HTTP_KEYS_FILE: {exc}") from None
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if keys is None and not loopback:
        # An open door on the network would let anyone spend this host's CPU on their files.
        raise ConfigurationError(
            f"without API keys (AIRLOCK_HTTP_KEYS_FILE) airlock serve listens on loopback "
            f"only, not on {host}"
        )
    where = (
        f"through the queue at {settings.broker_url}"
        if settings.broker_configured
        else "in this process's sandbox"
    )
    access = f"{len(keys.digests)} API keys" if keys else "no API keys: loopback only"
    # Bound before anything is announced: a port in use was announced as served, then failed
    # in uvicorn's own words with its own exit status.
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigurationError(f"cannot listen on {host}:{port}: {reason}") from None
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
    sys.stderr.write(f"airlock serve: http://{shown}:{port}/ extracting {where}; {access}\n")
    config = uvicorn.Config(create_app(settings, keys), log_level="warning")
    uvicorn.Server(config).run(sockets=[listening])
    return EXIT_OK


def _above_zero(kind: type[float]) -> Callable[[str], float]:
    """A flag's number, refused by argparse unless it is above zero: ``--max-pages 0`` was
    refused in the words of a class the user never named, ``--deadline -5`` not at all."""

    def parse(raw: str) -> float:
        try:
            value = kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"{raw!r} must be above 0")
        return value

    return parse


def _port(raw: str) -> int:
    try:
        return listening_port("--port", raw)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _doctor_json(report: DoctorReport) -> dict[str, object]:
    return {
        "active": sorted(report.mechanisms),
        "missing": sorted(report.missing),
        "required": sorted(report.required),
        "missing_required": sorted(report.missing_required),
        "landlock_abi": report.landlock_abi,
        "libseccomp": report.libseccomp,
        "tcp_blocked": report.tcp_blocked,
        "tcp_outcome": report.tcp_outcome,
        "network_layers": [asdict(check) for check in report.layers],
        "tesseract": asdict(report.ocr),
        "healthy": report.healthy,
    }


def _doctor(args: argparse.Namespace, settings: Settings) -> int:
    from sandbox.doctor import probe  # noqa: PLC0415

    report = probe(settings.sandbox_require, settings.sandbox_uid_base)
    if args.json:
        json.dump(_doctor_json(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(report.lines()) + "\n")
    if not report.healthy:
        sys.stderr.write("airlock: the sandbox does not hold as required on this host\n")
        return EXIT_OMITTED
    return EXIT_OK


def _health(args: argparse.Namespace) -> int:
    from worker import health  # noqa: PLC0415

    settings = Settings.from_env()
    verdict = (
        health.live(settings) if args.live else health.ready(settings, args.worker, args.timeout)
    )
    (sys.stdout if verdict.healthy else sys.stderr).write(f"airlock: {verdict.detail}\n")
    return EXIT_OK if verdict.healthy else EXIT_UNHEALTHY


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, celery_args = parser.parse_known_args(argv)
    if celery_args and args.command != "worker":
        parser.error(f"unrecognized arguments: {' '.join(celery_args)}")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "extract":
            return _extract(args)
        if args.command == "worker":
            from worker.application import run_worker  # noqa: PLC0415

            settings = Settings.from_env()
            if {"airlock.ocr", "airlock.pages"} & set(settings.queues):
                _check_ocr_language(settings.ocr_language, "AIRLOCK_OCR_LANGUAGE")
            return run_worker(settings, celery_args)
        if args.command == "bridge":
            return _bridge(Settings.from_env())
        if args.command == "health":
            return _health(args)
        if args.command == "serve":
            return _serve(args)
        return _doctor(args, Settings.from_env())
    except QueueUnavailable as exc:
        sys.stderr.write(f"airlock: {exc}\n")
        return EXIT_BROKER
    except (OSError, BridgeContractError, ConfigurationError) as exc:
        sys.stderr.write(f"airlock: {exc}\n")
        return EXIT_USAGE
