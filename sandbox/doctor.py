"""Which isolation layers hold on this host, shown by attacking them rather than by asking.

A jailed child tries a TCP connect to a listener the probe opened, with every layer and then
with each network layer alone, so the report names the layer that stopped it.
See docs/sandbox.md, "The job's budget" (``airlock doctor``) and "Notes by module".
"""

from __future__ import annotations

import socket
import subprocess
from dataclasses import dataclass

from sandbox import landlock, ocr_languages, seccomp
from sandbox.document import Document, Paragraph
from sandbox.errors import SandboxError
from sandbox.extractors.ocr import TESSERACT
from sandbox.extractors.registry import extractor
from sandbox.jail import DEFAULT_UID_BASE, LANDLOCK, MECHANISMS, NETNS, SECCOMP
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import SandboxRunner, root_requirement

_CONNECT_KIND = "airlock-doctor-connect"
_MODULE = "sandbox.doctor"  # imported by the probe's fork servers, which register the kind
_NETWORK_LAYERS = (SECCOMP, LANDLOCK, NETNS)
_LIMITS = SandboxLimits(wall_seconds=10.0, cpu_seconds=5)


@extractor(_CONNECT_KIND)
def _connect(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect((b"127.0.0.1", int(payload)))
    return Document([Paragraph("connected")])


@dataclass(frozen=True)
class LayerCheck:
    """One network layer on its own (the other two skipped) against the TCP connect."""

    layer: str
    blocks_tcp: bool
    outcome: str


@dataclass(frozen=True)
class OcrEngine:
    """The tesseract binary the OCR path executes, and the languages it has data for."""

    path: str | None
    version: str
    languages: tuple[str, ...]


@dataclass(frozen=True)
class DoctorReport:
    mechanisms: frozenset[str]
    required: frozenset[str]
    landlock_abi: int
    libseccomp: bool
    tcp_blocked: bool
    tcp_outcome: str
    layers: tuple[LayerCheck, ...]
    ocr: OcrEngine

    @property
    def missing(self) -> frozenset[str]:
        return MECHANISMS - self.mechanisms

    @property
    def missing_required(self) -> frozenset[str]:
        """Required mechanisms this host lacks: a deployment must not run parsers here."""
        return self.required - self.mechanisms

    @property
    def healthy(self) -> bool:
        return self.tcp_blocked and not self.missing_required

    def lines(self) -> list[str]:
        lines = [
            f"active: {', '.join(sorted(self.mechanisms)) or 'none'}",
            f"missing: {', '.join(sorted(self.missing)) or 'none'}",
            f"required (AIRLOCK_SANDBOX_REQUIRE): {', '.join(sorted(self.required)) or 'none'}"
            + (
                f"; MISSING {', '.join(sorted(self.missing_required))}"
                if self.missing_required
                else ""
            ),
            f"tesseract: {self.ocr.path or 'NOT FOUND'} {self.ocr.version}; "
            f"languages: {', '.join(self.ocr.languages) or 'none'}",
            f"landlock ABI: {self.landlock_abi or 'unavailable'}; "
            f"libseccomp: {'found' if self.libseccomp else 'not found'}",
            f"TCP connect to 127.0.0.1 with all layers: "
            f"{'blocked' if self.tcp_blocked else 'NOT BLOCKED'} ({self.tcp_outcome})",
        ]
        lines.extend(
            f"  {check.layer} alone: {'blocks' if check.blocks_tcp else 'does not block'} "
            f"({check.outcome})"
            for check in self.layers
        )
        return lines


def _probe_runner(uid_base: int, skip: frozenset[str] = frozenset()) -> SandboxRunner:
    """A runner that requires nothing: a layer skipped on purpose is the point of a probe, and
    a layer the host lacks belongs in the report (which weighs the deployment's requirement),
    not in an exception that ends the probe before it reports anything."""
    return SandboxRunner(_LIMITS, warm_children=0, modules=(_MODULE,), uid_base=uid_base, skip=skip)


def _attempt(port: int, uid_base: int, skip: frozenset[str]) -> tuple[bool, str]:
    """Run the connect in a jailed child; (blocked, what happened)."""
    with _probe_runner(uid_base, skip) as runner:
        try:
            runner.run(_CONNECT_KIND, "text/plain", str(port).encode())
        except SandboxError as exc:
            return True, f"{type(exc).__name__}: {exc}"
    return False, "the connection succeeded"


def ocr_engine() -> OcrEngine:
    """Ask the tesseract binary for its version and languages (no untrusted input involved)."""
    if TESSERACT is None:
        return OcrEngine(None, "", ())
    try:
        version = subprocess.run(
            [TESSERACT, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.split("\n", 1)[0]
    except (OSError, subprocess.SubprocessError) as exc:
        return OcrEngine(TESSERACT, f"(unusable: {exc})", ())
    return OcrEngine(TESSERACT, version.strip(), ocr_languages.installed() or ())


def uninstalled_ocr_language(ocr_language: str) -> str | None:
    """Why ``ocr_language`` (``AIRLOCK_OCR_LANGUAGE``'s form) cannot be read on this host,
    naming the Debian packages to install, or None. Asked at start, so a missing pack stops
    the command instead of failing every scan with tesseract's "Error opening data file"."""
    installed = ocr_languages.installed()
    if installed is None:
        return None  # no tesseract, or an unusable one: the doctor and each OCR job say so
    choices = ParseLimits(ocr_language=ocr_languages.expanded(ocr_language)).ocr_languages
    return ocr_languages.missing(choices, installed)


def probe(required: frozenset[str] = frozenset(), uid_base: int = DEFAULT_UID_BASE) -> DoctorReport:
    """Attack the jail a deployment requiring ``required`` (and, as root, the uid drop) would
    run its jobs in, its children running as ``uid_base`` plus their pid."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with _probe_runner(uid_base) as runner:
            mechanisms = runner.mechanisms
        blocked, outcome = _attempt(port, uid_base, frozenset())
        layers = []
        for layer in _NETWORK_LAYERS:
            if layer not in mechanisms:
                layers.append(LayerCheck(layer, False, "unavailable on this host"))
                continue
            layer_blocked, layer_outcome = _attempt(
                port, uid_base, frozenset(_NETWORK_LAYERS) - {layer}
            )
            layers.append(LayerCheck(layer, layer_blocked, layer_outcome))
    return DoctorReport(
        mechanisms,
        required | root_requirement(),
        landlock.abi_version(),
        seccomp.compile_filter() is not None,
        blocked,
        outcome,
        tuple(layers),
        ocr_engine(),
    )
