"""The OpenAPI document at ``/openapi.json``, its schemas generated from msgspec types.

The selection is the stream service's own ``Selection`` type (bridge/service/schema.py), so the
two doors cannot describe one answer two ways.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from bridge import __version__
from bridge.knowledge.attachments import EXTRACTABLE_KINDS, ExtractionLimits
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS
from bridge.service.schema import AttachmentPages, Selection
from bridge.wire import OcrLanguage
from worker.door.config import MAX_WAIT_SECONDS


class ErrorDetail(msgspec.Struct, forbid_unknown_fields=True):
    type: Annotated[
        str,
        Meta(
            description="PayloadTooLarge, UnsupportedFormat, InvalidRequest, Unauthorized, "
            "NotFound, MethodNotAllowed, RequestTimeout, TooManyJobs, ServerBusy, "
            "QuotaExceeded, QueueFull, NoWorkers, QueueUnavailable, Omitted, Withdrawn, Timeout "
            "or InternalError."
        ),
    ]
    reason: str


class ErrorBody(msgspec.Struct, forbid_unknown_fields=True):
    error: ErrorDetail


class CallbackStatus(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    state: Literal["pending", "delivered", "failed"]
    attempts: Annotated[int, Meta(ge=0)]
    error: str | UnsetType = UNSET


class JobStatus(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: str
    url: str
    state: Literal["queued", "running", "done", "failed", "withdrawn"]
    files: Annotated[int, Meta(ge=1, description="While queued or running.")] | UnsetType = UNSET
    files_done: Annotated[int, Meta(ge=0)]
    pages_done: Annotated[int, Meta(ge=0)]
    pages_total: Annotated[int, Meta(ge=0)]
    selection: Selection | UnsetType = UNSET
    error: ErrorDetail | UnsetType = UNSET
    callback: CallbackStatus | UnsetType = UNSET


class ProcessMetadata(msgspec.Struct, forbid_unknown_fields=True):
    source: str
    revision: str
    dropped: list[tuple[str, str]]
    pages: list[AttachmentPages]


class ProcessAnswer(msgspec.Struct, forbid_unknown_fields=True):
    page_content: str
    metadata: ProcessMetadata


_COMPONENTS = (Selection, JobStatus, ErrorBody, ProcessAnswer)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        401: "no valid API key",
        404: "no such job for this key",
        408: "no byte of the body arrived for AIRLOCK_HTTP_BODY_IDLE_SECONDS",
        413: "over the byte ceiling; the rest was not read",
        415: "no file of a kind airlock reads",
        422: "a malformed request, or (drop-ins) the file was left out, with its reason",
        429: "the queue or the job table is full (Retry-After)",
        503: "no worker, or the queue's Redis unreachable (Retry-After)",
    }
    return {str(status): _json("ErrorBody", words[status]) for status in statuses}


#: The request's OCR language as the job wire and the bridge service's schema have it.
_OCR_LANGUAGE: dict[str, Any] = msgspec.json.schema(OcrLanguage)


def _query(limits: ExtractionLimits) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = []
    for field in fields(limits):
        ceiling = getattr(limits, field.name)
        kind = "number" if isinstance(ceiling, float) else "integer"
        parameters.append(
            {
                "name": field.name,
                "in": "query",
                "required": False,
                "description": f"{EXTRACTION_SETTINGS[field.name].help} (at most this "
                "server's ceiling)",
                "schema": {"type": kind, "exclusiveMinimum": 0, "maximum": ceiling},
            }
        )
    parameters.append(
        {
            "name": "kind",
            "in": "query",
            "required": False,
            "description": "declare every file as this kind instead of telling it by its "
            "name and bytes",
            "schema": {"type": "string", "enum": sorted(EXTRACTABLE_KINDS)},
        }
    )
    parameters.append(
        {
            "name": "ocr_language",
            "in": "query",
            "required": False,
            "description": _OCR_LANGUAGE["description"],
            "schema": {key: value for key, value in _OCR_LANGUAGE.items() if key != "description"},
        }
    )
    return parameters


def _raw_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    }


def document(limits: ExtractionLimits) -> dict[str, Any]:
    """The OpenAPI 3.1 document of this server, with its ceilings as the limits' maxima."""
    _, schemas = msgspec.json.schema_components(
        _COMPONENTS, ref_template="#/components/schemas/{name}"
    )
    filename = {
        "name": "X-Filename",
        "in": "header",
        "required": False,
        "description": "the file's name, URL-quoted (else Content-Disposition's filename, or "
        "the filename query parameter)",
        "schema": {"type": "string"},
    }
    job_id = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
    wait = {
        "name": "wait",
        "in": "query",
        "required": False,
        "description": "seconds to wait for the answer before a 202 with the job's URL",
        "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
    }
    callback = {
        "name": "callback",
        "in": "query",
        "required": False,
        "description": "a URL the job's status is POSTed to when it ends, signed "
        "(X-Airlock-Signature, X-Airlock-Timestamp); it must resolve to a public address",
        "schema": {"type": "string", "format": "uri"},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "airlock", "version": __version__},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/extract": {
                "post": {
                    "operationId": "extract",
                    "summary": "Extract one raw file, or every file of a multipart form",
                    "parameters": [*_query(limits), wait, callback, filename],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "file": {
                                            "type": "array",
                                            "items": {"type": "string", "format": "binary"},
                                        }
                                    },
                                }
                            },
                            "*/*": {"schema": {"type": "string", "format": "binary"}},
                        },
                    },
                    "responses": {
                        "200": _json("Selection", "the selection, as airlock extract --json"),
                        "202": _json("JobStatus", "still running: poll its url"),
                        **_errors(401, 408, 413, 415, 422, 429, 503),
                    },
                }
            },
            "/v1/jobs/{job_id}": {
                "get": {
                    "operationId": "job",
                    "summary": "A job's state, progress and answer",
                    "parameters": [job_id],
                    "responses": {
                        "200": _json("JobStatus", "the job"),
                        **_errors(401, 404),
                    },
                },
                "delete": {
                    "operationId": "withdraw",
                    "summary": "Withdraw a job: queued work is not run, a running job's answer "
                    "is discarded",
                    "parameters": [job_id],
                    "responses": {
                        "200": _json("JobStatus", "the job, withdrawn"),
                        **_errors(401, 404),
                    },
                },
            },
            "/process": {
                "put": {
                    "operationId": "process",
                    "summary": "Open WebUI's external document loader",
                    "parameters": [*_query(limits), filename],
                    "requestBody": _raw_body(),
                    "responses": {
                        "200": _json("ProcessAnswer", "the text and where it came from"),
                        **_errors(401, 408, 413, 415, 422, 429, 503),
                    },
                }
            },
            "/tika": {
                "put": {
                    "operationId": "tika",
                    "summary": "Tika's text endpoint",
                    "parameters": [*_query(limits), filename],
                    "requestBody": _raw_body(),
                    "responses": {
                        "200": {
                            "description": "the text",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        **_errors(401, 408, 413, 415, 429, 503),
                        "422": {
                            "description": "the file was left out: its reason as text; or a "
                            "malformed request (InvalidRequest, JSON)",
                            "content": {
                                "text/plain": {"schema": {"type": "string"}},
                                "application/json": {"schema": _ref("ErrorBody")},
                            },
                        },
                    },
                }
            },
            **{
                path: {
                    "get": {
                        "operationId": name,
                        "security": [],
                        "responses": {"200": {"description": description}},
                    }
                }
                for path, name, description in (
                    ("/healthz", "healthz", "the process answers"),
                    ("/readyz", "readyz", "it takes jobs (503 when its job table is full)"),
                    ("/metrics", "metrics", "Prometheus text"),
                    ("/openapi.json", "openapi", "this document"),
                )
            },
        },
    }
