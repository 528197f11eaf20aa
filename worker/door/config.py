"""The HTTP door's settings, read with every other variable by ``worker.config``."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

#: Loopback unless keys are configured: an open door on every interface would let anyone on
#: the network spend this host's CPU on their files.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: The longest a request may wait for its answer before it is answered 202 with its job's URL
#: (gateways commonly cut a request at 60 s; docling-serve's users met exactly that).
MAX_WAIT_SECONDS = 600.0
DEFAULT_WAIT_SECONDS = 30.0


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(raw: str) -> tuple[Network, ...]:
    """``AIRLOCK_HTTP_CALLBACK_ALLOW``: comma-separated CIDR ranges a callback may reach
    although they are not public (``127.0.0.0/8`` for tests, ``10.0.0.0/8`` for operators)."""
    return tuple(
        ipaddress.ip_network(part.strip(), strict=False) for part in raw.split(",") if part.strip()
    )


@dataclass(frozen=True)
class DoorConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    #: Bearer keys, hashed (docs/http.md, Keys); None: no keys, loopback only.
    keys_file: Path | None = None
    #: Seconds a finished job's answer stays readable at its URL.
    result_ttl: int = 3600
    #: Jobs held at once (queued, running or finished and unread); past it a request is
    #: answered 429 instead of taking more memory.
    max_jobs: int = 1000
    #: Jobs one key may have queued or running at once.
    key_max_jobs: int = 16
    #: Upload bytes held in memory at once, by bodies arriving and by queued and running jobs
    #: (two 32-file forms at the default 8 MiB per file); past it a request is answered 429
    #: ``ServerBusy``.
    max_held_bytes: int = 512 * 1024 * 1024
    #: Request bytes one key may send per minute (a token bucket: bursts up to it pass).
    key_bytes_per_minute: int = 1024 * 1024 * 1024
    #: Seconds a request body may go without a byte before it is answered 408.
    body_idle_seconds: float = 30.0
    #: Ranges a callback may reach although they are not public.
    callback_allow: tuple[Network, ...] = ()
