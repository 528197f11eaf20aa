"""The door's routes: uploads in, selections out, every refusal a typed JSON body.

Starlette, not FastAPI: the wire types are msgspec's (the stream service's own), and
FastAPI's request models would be a second, pydantic copy of them. docs/http.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.resources
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bridge.knowledge.attachments import EXTRACTABLE_KINDS, AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.knowledge.failures import NO_WORKERS, QUEUE_FULL
from bridge.queue.source import QueueFull, QueueUnavailable
from bridge.service.schema import InvalidRequest, query_limits
from bridge.wire import ocr_language_problem
from worker.config import Settings
from worker.door import openapi
from worker.door.callbacks import CallbackRefused, Callbacks, Delivery, Target
from worker.door.config import DEFAULT_WAIT_SECONDS, MAX_WAIT_SECONDS
from worker.door.jobs import (
    BytesFull,
    HttpFailure,
    Job,
    Jobs,
    JobsFull,
    JobState,
    OwnerBusy,
    Reservation,
    Runner,
)
from worker.door.keys import LOCAL_OWNER, ApiKeys
from worker.door.metrics import DoorMetrics
from worker.door.quotas import ByteQuota
from worker.door.uploads import Refused, Upload, form_uploads, raw_upload, unsupported
from worker.selections import (
    QUEUED_DEADLINE_SECONDS,
    QueueClients,
    extract_locally,
    selection_json,
)

_log = logging.getLogger(__name__)
#: Threads running queued jobs at once: each only waits on Redis, so they bound how many jobs
#: this door has on the workers at a time, not its CPU (the queue's own bound is
#: AIRLOCK_MAX_QUEUED; past it, jobs are answered QueueFull).
_QUEUED_JOB_THREADS = 64
#: Seconds a client is told to wait before trying again when the service is saturated.
_RETRY_AFTER_SECONDS = 5
#: The status a request whose client left before it was answered is counted with (nginx's).
_CLIENT_CLOSED = 499
#: How often a request waiting for its job looks whether its client is still there.
_DEPARTURE_TICK = 1.0
_JSON = "application/json"
#: The query parameters read as limits (every other one is another parameter, or ignored).
_LIMIT_NAMES = frozenset(field.name for field in dataclasses.fields(ExtractionLimits))
_STATIC = importlib.resources.files("worker.door") / "static"
#: The page shows text taken from hostile files: should any of it ever reach the DOM as
#: markup, no inline script, no other origin's script and no framing would run it.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _Unserved(Exception):
    """The whole request is answered with ``failure``: no worker, or no queue room, for any
    of its files (a selection of nothing but those reasons says nothing about the files)."""

    def __init__(self, failure: HttpFailure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def _unserved(selection: IngestSelection) -> HttpFailure | None:
    if selection.text or not selection.dropped:
        return None
    reasons = [reason for _, reason in selection.dropped]
    if all(f"failed: {QUEUE_FULL}:" in reason for reason in reasons):
        return HttpFailure(429, "QueueFull", reasons[0], _RETRY_AFTER_SECONDS)
    if all(f"failed: {NO_WORKERS}:" in reason or f"failed: {QUEUE_FULL}:" in reason
           for reason in reasons):  # fmt: skip
        return HttpFailure(503, "NoWorkers", reasons[0], _RETRY_AFTER_SECONDS)
    return None


def _runner(settings: Settings, clients: QueueClients) -> Runner:
    def run(
        refs: Sequence[AttachmentRef],
        limits: ExtractionLimits,
        file_done: Callable[[], None],
        pages: Callable[[int, int], None],
        withdrawn: threading.Event,
        *,
        ocr_language: str | None,
    ) -> str:
        if settings.broker_configured:
            selection = clients.extract(
                refs,
                limits,
                deadline=QUEUED_DEADLINE_SECONDS,
                use_cache=True,
                ocr_language=ocr_language,
                on_file=file_done,
                on_pages=pages,
                withdrawn=withdrawn,
            )
            unserved = _unserved(selection)
            if unserved is not None:
                raise _Unserved(unserved)
        else:
            # One child per job at a time: the pool runs AIRLOCK_CONCURRENCY jobs, so this
            # host never runs more children than it has cores for.
            selection = extract_locally(
                refs,
                limits,
                settings,
                concurrency=1,
                ocr_language=ocr_language,
                on_file=file_done,
                on_pages=pages,
                withdrawn=withdrawn,
            )
        return selection_json(selection)

    return run


def _classify(exc: Exception) -> HttpFailure:
    if isinstance(exc, _Unserved):
        return exc.failure
    if isinstance(exc, QueueFull):
        return HttpFailure(429, "QueueFull", str(exc), _RETRY_AFTER_SECONDS)
    if isinstance(exc, QueueUnavailable):
        return HttpFailure(503, "QueueUnavailable", str(exc), _RETRY_AFTER_SECONDS)
    _log.error("a job failed outside its files' outcomes: %s: %s", type(exc).__name__, exc)
    return HttpFailure(500, "InternalError", f"{type(exc).__name__}: the job could not run")


def error_response(failure: HttpFailure, headers: dict[str, str] | None = None) -> JSONResponse:
    extra = dict(headers or {})
    if failure.retry_after is not None:
        extra["Retry-After"] = str(failure.retry_after)
    body = {"error": {"type": failure.type, "reason": failure.reason}}
    return JSONResponse(body, status_code=failure.status, headers=extra)


def _invalid(reason: str) -> Refused:
    return Refused(HttpFailure(422, "InvalidRequest", reason))


class Door:
    """The application's state: settings, keys, jobs and metrics; its routes are methods."""

    def __init__(self, settings: Settings, keys: ApiKeys | None) -> None:
        self.settings = settings
        self.keys = keys
        workers = _QUEUED_JOB_THREADS if settings.broker_configured else settings.concurrency
        self.clients = QueueClients(settings)
        self.jobs = Jobs(
            _runner(settings, self.clients),
            _classify,
            workers=workers,
            ttl=settings.http.result_ttl,
            max_jobs=settings.http.max_jobs,
            owner_max_jobs=settings.http.key_max_jobs,
            max_held_bytes=settings.http.max_held_bytes,
            on_end=self._ended,
        )
        self.callbacks = Callbacks(settings.http.callback_allow)
        self._callbacks: dict[str, Target] = {}
        self._lock = threading.Lock()
        self.quota = ByteQuota(settings.http.key_bytes_per_minute)
        self.metrics = DoorMetrics()

    # --- request helpers ----------------------------------------------------------------

    def _owner(self, request: Request) -> str:
        if self.keys is None:
            return LOCAL_OWNER
        owner = self.keys.owner(request.headers.get("authorization"))
        if owner is None:
            raise Refused(
                HttpFailure(
                    401, "Unauthorized", "a valid API key is required: Authorization: Bearer <key>"
                )
            )
        return owner

    def _limits(self, request: Request) -> ExtractionLimits:
        ceilings = self.settings.extraction_limits
        asked = {
            name: value for name, value in request.query_params.items() if name in _LIMIT_NAMES
        }
        try:
            return query_limits(asked, ceilings)
        except InvalidRequest as exc:
            raise _invalid(exc.reason) from None

    @staticmethod
    def _kind(request: Request) -> str | None:
        kind = request.query_params.get("kind")
        if kind is not None and kind not in EXTRACTABLE_KINDS:
            raise _invalid(f"kind must be one of {', '.join(sorted(EXTRACTABLE_KINDS))}")
        return kind

    def _ocr_language(self, request: Request) -> str | None:
        ocr_language = request.query_params.get("ocr_language")
        if ocr_language is None:
            return None
        # A query's '+' arrives as a space (form encoding): ?ocr_language=eng+deu is what
        # people type, and no language name holds a space.
        ocr_language = ocr_language.replace(" ", "+")
        problem = ocr_language_problem(ocr_language) or self.settings.refused_ocr_language(
            ocr_language
        )
        if problem is not None:
            raise _invalid(f"ocr_language: {problem}")
        return ocr_language

    @staticmethod
    def _wait(request: Request, default: float) -> float:
        raw = request.query_params.get("wait")
        if raw is None:
            return default
        try:
            wait = float(raw)
        except ValueError:
            wait = -1.0
        if not 0 <= wait <= MAX_WAIT_SECONDS:
            raise _invalid(f"wait must be a number of seconds from 0 to {MAX_WAIT_SECONDS:g}")
        return wait

    def _admit(self, owner: str) -> Callable[[int], None]:
        def admit(size: int) -> None:
            wait = self.quota.charge(owner, size)
            if wait is not None:
                raise Refused(
                    HttpFailure(
                        429,
                        "QuotaExceeded",
                        f"this key has sent its {self.settings.http.key_bytes_per_minute} "
                        f"bytes per minute (AIRLOCK_HTTP_KEY_MB_PER_MINUTE); {size} more "
                        f"fit in {wait} s",
                        wait,
                    )
                )

        return admit

    def _reserve(self, reservation: Reservation) -> Callable[[int], None]:
        def reserve(size: int) -> None:
            try:
                reservation.add(size)
            except BytesFull as exc:
                raise self._no_room(exc) from None

        return reserve

    async def _received(
        self,
        request: Request,
        owner: str,
        *,
        kind: str | None,
        limits: ExtractionLimits,
        ocr_language: str | None,
        form: bool = True,
        callback: Target | None = None,
    ) -> Job:
        """The request's files, received and submitted as ``owner``'s job (a form's files
        when ``form`` allows one, else the body as one file). Their bytes are held against the
        door's bound as they arrive and pass to the job; a refused or broken upload gives them
        back at once."""
        reservation = self.jobs.reservation()
        try:
            idle = self.settings.http.body_idle_seconds
            admit, reserve = self._admit(owner), self._reserve(reservation)
            content_type = request.headers.get("content-type", "").lower()
            if form and content_type.startswith("multipart/form-data"):
                uploads = await form_uploads(request, limits, admit, reserve, idle)
            else:
                uploads = [await raw_upload(request, limits, admit, reserve, idle)]
            return self._submit(
                request,
                owner,
                uploads,
                kind=kind,
                limits=limits,
                ocr_language=ocr_language,
                reservation=reservation,
                callback=callback,
            )
        finally:
            reservation.release()  # what no job took

    def _submit(
        self,
        request: Request,
        owner: str,
        uploads: list[Upload],
        *,
        kind: str | None,
        limits: ExtractionLimits,
        ocr_language: str | None,
        reservation: Reservation,
        callback: Target | None = None,
    ) -> Job:
        refs = [upload.ref(kind) for upload in uploads]
        refusal = unsupported(refs)
        if refusal is not None:
            raise refusal
        try:
            job = self.jobs.submit(
                owner,
                refs,
                limits,
                lambda job_id: str(request.url_for("job", job_id=job_id)),
                None if callback is None else Delivery(),
                ocr_language=ocr_language,
                reservation=reservation,
            )
        except OwnerBusy:
            raise Refused(
                HttpFailure(
                    429,
                    "TooManyJobs",
                    f"this key has {self.settings.http.key_max_jobs} jobs queued or running "
                    "(AIRLOCK_HTTP_KEY_MAX_JOBS); wait for one to end",
                    _RETRY_AFTER_SECONDS,
                )
            ) from None
        except JobsFull:
            raise Refused(
                HttpFailure(
                    429,
                    "TooManyJobs",
                    f"this server holds {self.settings.http.max_jobs} jobs already "
                    "(AIRLOCK_HTTP_MAX_JOBS); read or delete finished ones, or try again",
                    _RETRY_AFTER_SECONDS,
                )
            ) from None
        if callback is not None:
            with self._lock:
                self._callbacks[job.id] = callback
        return job

    def _no_room(self, exc: BytesFull) -> Refused:
        ceiling = self.settings.http.max_held_bytes
        if exc.never:
            return Refused(
                HttpFailure(
                    413,
                    "PayloadTooLarge",
                    f"the request's files are {exc.size} bytes, over the {ceiling} bytes this "
                    "server holds for all jobs at once (AIRLOCK_HTTP_MAX_HELD_MB); send fewer "
                    "files per request",
                )
            )
        return Refused(
            HttpFailure(
                429,
                "ServerBusy",
                f"uploads arriving and the jobs queued or running hold most of the {ceiling} "
                f"bytes this server keeps at once (AIRLOCK_HTTP_MAX_HELD_MB): no room for "
                f"{exc.size} more now; try again",
                _RETRY_AFTER_SECONDS,
            )
        )

    def _ended(self, job: Job) -> None:
        """A job ended: its callback, if it asked for one, is sent its status."""
        with self._lock:
            target = self._callbacks.pop(job.id, None)
        if target is None or job.callback is None or job.state is JobState.WITHDRAWN:
            return
        secret = None if self.keys is None else self.keys.digests.get(job.owner)
        self.callbacks.send(
            target, lambda: json.dumps(self._status(job)).encode(), secret, job.callback
        )

    async def _callback(self, request: Request) -> Target | None:
        raw = request.query_params.get("callback")
        if raw is None:
            return None
        try:
            # Resolved off the event loop: a slow DNS answer must not stall other requests.
            return await asyncio.to_thread(self.callbacks.check, raw)
        except CallbackRefused as exc:
            raise _invalid(f"callback: {exc}") from None

    async def _settled(self, request: Request, job: Job, wait: float) -> bool:
        """Whether ``job`` ended within ``wait`` seconds (it runs on either way).

        A client that leaves before then never learns the job's URL, so nobody could read its
        answer: the job is withdrawn (its children killed), unless a callback is to have it.
        """
        assert job.future is not None
        ending = asyncio.wrap_future(job.future)
        deadline = time.monotonic() + wait
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(asyncio.shield(ending), min(remaining, _DEPARTURE_TICK))
            except TimeoutError:
                if job.callback is None and await request.is_disconnected():
                    self.jobs.withdraw(job.owner, job.id)
                    return False
                continue
            except asyncio.CancelledError:
                if job.state is JobState.WITHDRAWN:
                    return True
                raise
            return True
        return False

    # --- routes -------------------------------------------------------------------------

    async def extract(self, request: Request) -> Response:
        owner = self._owner(request)
        limits, kind = self._limits(request), self._kind(request)
        ocr_language = self._ocr_language(request)
        wait = self._wait(request, DEFAULT_WAIT_SECONDS)
        callback = await self._callback(request)
        job = await self._received(
            request,
            owner,
            kind=kind,
            limits=limits,
            ocr_language=ocr_language,
            callback=callback,
        )
        if await self._settled(request, job, wait):
            answer = self._answer(job)
            if job.callback is None:
                # Answered in full: kept, it would hold its payload and a place in the job
                # table for an hour (1,000 such answers once filled the table, 429 to all).
                self.jobs.withdraw(owner, job.id)
            else:
                # Its callback's fate stays readable at its URL.
                answer.headers["Content-Location"] = job.url
            return answer
        return JSONResponse(self._status(job), status_code=202, headers={"Location": job.url})

    def _answer(self, job: Job) -> Response:
        if job.failure is not None:
            return error_response(job.failure)
        if job.result is None:
            return error_response(HttpFailure(409, "Withdrawn", "the job was withdrawn"))
        return Response(job.result, media_type=_JSON)

    def _status(self, job: Job) -> dict[str, Any]:
        status: dict[str, Any] = {"id": job.id, "url": job.url, "state": job.state.value}
        if job.state in (JobState.QUEUED, JobState.RUNNING):
            status["files"] = len(job.refs)
        status |= {
            "files_done": job.files_done,
            "pages_done": job.pages_done,
            "pages_total": job.pages_total,
        }
        if job.result is not None:
            status["selection"] = json.loads(job.result)
        if job.failure is not None:
            status["error"] = {"type": job.failure.type, "reason": job.failure.reason}
        if job.callback is not None:
            status["callback"] = {
                "state": job.callback.state,
                "attempts": job.callback.attempts,
                **({"error": job.callback.last_error} if job.callback.last_error else {}),
            }
        return status

    async def job(self, request: Request) -> Response:
        owner = self._owner(request)
        job = self.jobs.find(owner, request.path_params["job_id"])
        if job is None:
            raise Refused(HttpFailure(404, "NotFound", "no such job for this key"))
        return JSONResponse(self._status(job))

    async def withdraw(self, request: Request) -> Response:
        owner = self._owner(request)
        job = self.jobs.withdraw(owner, request.path_params["job_id"])
        if job is None:
            raise Refused(HttpFailure(404, "NotFound", "no such job for this key"))
        return JSONResponse(self._status(job))

    async def job_or_withdraw(self, request: Request) -> Response:
        # One route per path: two would answer OPTIONS with the first one's methods alone.
        return await (self.withdraw if request.method == "DELETE" else self.job)(request)

    async def _whole(self, request: Request) -> tuple[Job, dict[str, Any]]:
        """One raw file, run to its end, and its selection (the drop-ins' clients do not poll,
        so the job is forgotten as soon as it is answered)."""
        owner = self._owner(request)
        limits, kind = self._limits(request), self._kind(request)
        job = await self._received(
            request,
            owner,
            kind=kind,
            limits=limits,
            ocr_language=self._ocr_language(request),
            form=False,
        )
        settled = await self._settled(request, job, MAX_WAIT_SECONDS + QUEUED_DEADLINE_SECONDS)
        self.jobs.withdraw(owner, job.id)
        if not settled:
            raise Refused(HttpFailure(504, "Timeout", "the file was not read in time"))
        if job.failure is not None:
            raise Refused(job.failure)
        if job.result is None:
            raise Refused(HttpFailure(409, "Withdrawn", "the job was withdrawn"))
        selection: dict[str, Any] = json.loads(job.result)
        return job, selection

    async def process(self, request: Request) -> Response:
        """Open WebUI's external document loader: ``{"page_content", "metadata"}``."""
        job, selection = await self._whole(request)
        if not selection["text"] and selection["dropped"]:
            # Left out: an error the user sees in Open WebUI, never an empty document.
            raise Refused(HttpFailure(422, "Omitted", selection["dropped"][0][1]))
        metadata = {
            "source": job.labels[0],
            "revision": selection["revision"],
            "dropped": selection["dropped"],
            "pages": selection["pages"],
        }
        return JSONResponse({"page_content": selection["text"], "metadata": metadata})

    async def tika(self, request: Request) -> Response:
        """Tika's ``PUT /tika`` with ``Accept: text/plain``: the text alone."""
        _, selection = await self._whole(request)
        if not selection["text"] and selection["dropped"]:
            return PlainTextResponse(selection["dropped"][0][1] + "\n", status_code=422)
        return PlainTextResponse(selection["text"])

    async def page(self, request: Request) -> Response:
        """The upload page and its two files, under a policy that runs no other script."""
        name = {"/": "index.html", "/ui.js": "ui.js", "/ui.css": "ui.css"}[request.url.path]
        media_type = {"html": "text/html", "js": "text/javascript", "css": "text/css"}
        body = (_STATIC / name).read_bytes()
        return Response(body, media_type=media_type[name.rsplit(".", 1)[1]], headers=_PAGE_HEADERS)

    async def page_settings(self, _: Request) -> Response:
        return JSONResponse({"keys": self.keys is not None}, headers=_PAGE_HEADERS)

    async def healthz(self, _: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(self, _: Request) -> Response:
        if self.jobs.full():
            return PlainTextResponse("busy\n", status_code=503, headers={"Retry-After": "5"})
        return PlainTextResponse("ready\n")

    async def metrics_page(self, _: Request) -> Response:
        body, content_type = self.metrics.exposition(self.jobs.in_flight(), self.jobs.held())
        return Response(body, media_type=content_type)

    async def openapi_document(self, request: Request) -> Response:
        return JSONResponse(openapi.document(self.settings.extraction_limits))


def _guarded(
    door: Door, endpoint: Callable[[Request], Awaitable[Response]], route: str
) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint`` with its refusals answered as typed JSON and counted by route."""

    async def handle(request: Request) -> Response:
        started = time.monotonic()
        try:
            response = await endpoint(request)
        except Refused as refused:
            extra = {"WWW-Authenticate": "Bearer"} if refused.failure.status == 401 else None
            response = error_response(refused.failure, extra)
        except ClientDisconnect:
            # The client left mid-body: nobody reads an answer, and a traceback per dropped
            # connection would let any client flood the error log. Counted as nginx does.
            response = Response(status_code=_CLIENT_CLOSED)
        door.metrics.observe(route, response.status_code, time.monotonic() - started)
        return response

    return handle


async def _typed_http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kinds = {404: "NotFound", 405: "MethodNotAllowed"}
    failure = HttpFailure(exc.status_code, kinds.get(exc.status_code, "InvalidRequest"), exc.detail)
    return error_response(failure, dict(exc.headers or {}))


@contextlib.asynccontextmanager
async def _closing(door: Door) -> AsyncIterator[None]:
    yield
    door.jobs.close()
    door.callbacks.close()
    door.clients.close()


def create_app(settings: Settings, keys: ApiKeys | None) -> Starlette:
    door = Door(settings, keys)
    routes = [
        ("/v1/extract", door.extract, ["POST"], "extract"),
        ("/v1/jobs/{job_id}", door.job_or_withdraw, ["GET", "DELETE"], "job"),
        ("/process", door.process, ["PUT"], "process"),
        ("/tika", door.tika, ["PUT"], "tika"),
        ("/", door.page, ["GET"], "page"),
        ("/ui.js", door.page, ["GET"], "page_script"),
        ("/ui.css", door.page, ["GET"], "page_style"),
        ("/ui/settings", door.page_settings, ["GET"], "page_settings"),
        ("/healthz", door.healthz, ["GET"], "healthz"),
        ("/readyz", door.readyz, ["GET"], "readyz"),
        ("/metrics", door.metrics_page, ["GET"], "metrics"),
        ("/openapi.json", door.openapi_document, ["GET"], "openapi"),
    ]
    app = Starlette(
        # Starlette's own refusals (no such path, a method the path does not take) are
        # typed like every other.
        exception_handlers={HTTPException: _typed_http_error},
        routes=[
            Route(path, _guarded(door, endpoint, name), methods=methods, name=name)
            for path, endpoint, methods, name in routes
        ],
        lifespan=lambda _: _closing(door),
    )
    app.state.door = door
    return app
