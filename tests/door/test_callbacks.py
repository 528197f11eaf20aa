"""Callbacks from ``airlock serve``: delivered to a loopback receiver this test runs, signed
and timestamped, retried past a receiver that fails twice; refused for private, loopback and
link-local targets unless allowed, and a redirect into them is not followed."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.door.serving import Door

pytestmark = pytest.mark.slow


@dataclass
class Receiver:
    """A loopback HTTP receiver: fails its first ``failures`` POSTs with 500, or redirects
    every POST to ``redirect``; records what it was sent."""

    failures: int = 0
    redirect: str | None = None
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    attempts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.attempts += 1
                if receiver.redirect is not None:
                    self.send_response(307)
                    self.send_header("Location", receiver.redirect)
                elif receiver.attempts <= receiver.failures:
                    self.send_response(500)
                else:
                    receiver.received.append((dict(self.headers.items()), body))
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver(failures=2)
    running.start()
    yield running
    running.stop()


def _wait(condition: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_callback_is_signed_and_retried_past_a_receiver_that_fails_twice(
    tmp_path: Path, receiver: Receiver
) -> None:
    key = "acme-key"
    digest = hashlib.sha256(key.encode()).hexdigest()
    keys = tmp_path / "keys"
    keys.write_text(f"acme {digest}\n")
    door = Door(
        {"AIRLOCK_HTTP_KEYS_FILE": str(keys), "AIRLOCK_HTTP_CALLBACK_ALLOW": "127.0.0.0/8"},
        tmp_path,
    )
    auth = {"Authorization": f"Bearer {key}"}
    try:
        accepted = httpx.post(
            f"{door.url}/v1/extract",
            params={"wait": "0", "callback": receiver.url},
            content=b"called back",
            headers={**auth, "X-Filename": "note.txt"},
        )
        assert accepted.status_code in (200, 202), accepted.text
        _wait(lambda: receiver.received, "the callback")
        [(headers, body)] = receiver.received
        assert receiver.attempts == 3  # two 500s, then delivered
        timestamp = headers["X-Airlock-Timestamp"]
        assert abs(int(timestamp) - time.time()) < 300
        expected = hmac.new(digest.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
        assert headers["X-Airlock-Signature"] == f"sha256={expected.hexdigest()}"
        status = json.loads(body)
        assert status["state"] == "done"
        assert status["selection"]["text"] == "ATTACHMENT [note.txt]\ncalled back"
        url = status["url"]
        _wait(
            lambda: httpx.get(url, headers=auth).json()["callback"]["state"] == "delivered",
            "the job to say its callback was delivered",
        )
        assert httpx.get(url, headers=auth).json()["callback"]["attempts"] == 3
    finally:
        door.stop()


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:9/hook",  # loopback
        "http://10.1.2.3/hook",  # private
        "http://169.254.169.254/latest/meta-data/",  # link-local: the cloud's metadata
        "http://[::1]:9/hook",  # loopback, IPv6
        "http://0.0.0.0/hook",  # unspecified
        "ftp://example.org/hook",  # not http
        "http://user:pass@127.0.0.1/hook",  # a login in the URL
        # IPv6 carrying a private IPv4 address for a translator or tunnel (an attacker found
        # these accepted: Python calls them global).
        "http://[64:ff9b::7f00:1]:9/hook",  # NAT64 to 127.0.0.1
        "http://[64:ff9b:1::a9fe:a9fe]/hook",  # local-use NAT64 to the metadata address
        "http://[::127.0.0.1]:9/hook",  # IPv4-compatible
        "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
        # Malformed: once an untyped 500.
        "http://example.com:99999/hook",
        "http://[::1/hook",
    ],
)
def test_a_callback_into_the_inside_is_refused_unless_allowed(tmp_path: Path, target: str) -> None:
    door = Door({}, tmp_path)
    try:
        refused = httpx.post(f"{door.url}/v1/extract", params={"callback": target}, content=b"text")
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["reason"].startswith("callback: ")
    finally:
        door.stop()


def test_a_redirect_into_the_inside_is_not_followed(tmp_path: Path) -> None:
    """The receiver is allowed (loopback), but it redirects to the metadata address."""
    redirecting = Receiver(redirect="http://169.254.169.254/latest/meta-data/")
    redirecting.start()
    door = Door({"AIRLOCK_HTTP_CALLBACK_ALLOW": "127.0.0.0/8"}, tmp_path)
    try:
        accepted = httpx.post(
            f"{door.url}/v1/extract",
            params={"wait": "60", "callback": redirecting.url},
            content=b"text",
        )
        assert accepted.status_code == 200
        job = accepted.headers["content-location"]

        def failed() -> bool:
            return bool(httpx.get(job).json()["callback"]["state"] == "failed")

        _wait(failed, "every attempt to fail", timeout=60)
        callback = httpx.get(job).json()["callback"]
        assert callback["attempts"] == 4
        assert "a redirect was refused" in callback["error"]
        assert "169.254.169.254" in callback["error"]
    finally:
        door.stop()
        redirecting.stop()
    assert redirecting.received == []
