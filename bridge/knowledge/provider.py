"""The older async knowledge-provider port, adapted once into the synchronous retriever port.

``ProviderRetriever`` is the one place coroutine providers meet the synchronous prompt
compiler, so neither side has to be rewritten (docs/spec-decisions.md, Provider adapter).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from bridge.knowledge.errors import BridgeContractError, KnowledgeBridgeError
from bridge.knowledge.retrieval import RetrievedFragment

#: How long one retrieval may take before the turn goes on without it. A vector search answers
#: in well under a second; five seconds is a store that is down or overloaded, and the turn
#: that waits for it is blocked all that time.
DEFAULT_PROVIDER_TIMEOUT = 5.0


class ProviderUnavailable(KnowledgeBridgeError):
    """A knowledge provider failed, timed out, or answered with something that is not fragments.

    ``__cause__`` holds what the provider raised. Provider code is third-party and its
    exceptions are not this package's vocabulary, so they are translated here rather than left
    to surprise a caller who catches :class:`KnowledgeBridgeError`.
    """


@dataclass(frozen=True)
class KnowledgeFragment:
    """One scored chunk from a knowledge provider, with its human-readable source name."""

    content: str
    source: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_retrieved(self) -> RetrievedFragment:
        """The same chunk as the retrieval bridge's fragment; metadata is copied, not shared."""
        return RetrievedFragment(
            content=self.content,
            source=self.source,
            score=self.score,
            metadata=dict(self.metadata),
        )

    def format_citation(self) -> str:
        """This fragment as one ``SOURCE [name]: content`` line.

        Rendered by the retrieval bridge's own citation line rather than by interpolating the
        raw fields: a provider's source name containing ``]`` or a chunk containing a line
        break would otherwise forge a citation attributed to some other source.
        """
        return self.to_retrieved().citation_line()


class KnowledgeProvider(Protocol):
    """The async port older vector-store adapters implement.

    A provider wrapping a blocking client runs it with :func:`asyncio.to_thread` rather than
    blocking the event loop its coroutines run on.
    """

    async def search(self, query: str, limit: int = 3) -> list[KnowledgeFragment]:
        """Fragments for ``query``, best first, at most ``limit`` of them."""
        ...

    async def collection_info(self) -> dict[str, Any]:
        """Metadata about the connected collection, with at least ``name`` and ``count``."""
        ...


class ProviderRetriever:
    """A :class:`~bridge.knowledge.retrieval.KnowledgeRetriever` backed by an async provider.

    The provider's coroutines run on an event loop this adapter owns, in a thread of its own.
    That is what makes :meth:`retrieve` callable from anywhere, including from code already
    running inside an event loop, where :func:`asyncio.run` would refuse to start. The caller's
    thread blocks for at most ``timeout`` seconds; after that the provider's coroutine is
    cancelled and :class:`ProviderUnavailable` is raised. The provider must therefore not rely
    on objects bound to the caller's loop (create its client inside its own coroutines).

    Close it (or use it as a context manager) when the deployment shuts down: the thread and
    loop live until then.
    """

    def __init__(
        self, provider: KnowledgeProvider, *, timeout: float = DEFAULT_PROVIDER_TIMEOUT
    ) -> None:
        if not callable(getattr(provider, "search", None)):
            raise BridgeContractError(
                f"{type(provider).__name__} has no callable search(); a ProviderRetriever "
                "needs a KnowledgeProvider."
            )
        # A zero, negative, infinite or NaN timeout either fails every retrieval or lets a
        # dead store hang every turn; both are wiring mistakes to report now.
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise BridgeContractError(
                f"ProviderRetriever timeout must be a positive number of seconds, not {timeout!r}"
            )
        self._provider = provider
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="knowledge-provider-loop", daemon=True
        )
        self._thread.start()

    def retrieve(self, query: str, *, limit: int) -> Sequence[RetrievedFragment]:
        """Ask the provider for ``limit`` fragments and convert them; failures are typed."""
        with self._lock:
            if self._closed:
                raise ProviderUnavailable("the knowledge provider adapter has been closed.")
            future = asyncio.run_coroutine_threadsafe(self._search(query, limit), self._loop)
        done, _ = concurrent.futures.wait((future,), timeout=self._timeout)
        if not done:
            # Cancelling the future cancels the task on the adapter's loop, so the abandoned
            # search stops instead of holding a connection for a turn that has moved on.
            future.cancel()
            raise ProviderUnavailable(
                f"the knowledge provider did not answer within {self._timeout} seconds."
            )
        try:
            answer = future.result()
        except Exception as exc:  # provider code is third-party: whatever it raises is typed
            raise ProviderUnavailable(f"the knowledge provider failed: {exc!r}") from exc
        return _converted(answer)

    async def _search(self, query: str, limit: int) -> object:
        # search() is called here, on the adapter's loop, rather than in the caller's thread:
        # a provider that raises before returning its coroutine, or returns something that is
        # not awaitable, then fails through the same typed path as one whose coroutine raises.
        return await self._provider.search(query, limit=limit)

    def close(self) -> None:
        """Cancel what is still running, stop the loop and join its thread. Idempotent.

        A provider stuck in blocking code cannot be cancelled; after ``timeout`` seconds the
        thread (a daemon) is abandoned rather than hanging shutdown, and the loop is left
        unclosed because closing a running loop is an error.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        cancelled = asyncio.run_coroutine_threadsafe(_cancel_pending_tasks(), self._loop)
        concurrent.futures.wait((cancelled,), timeout=self._timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=self._timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> ProviderRetriever:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


async def _cancel_pending_tasks() -> None:
    """Cancel every other task on the running loop and wait for them to finish unwinding."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


def _converted(answer: object) -> tuple[RetrievedFragment, ...]:
    """The provider's answer as retrieval fragments, or a typed refusal of a malformed one."""
    if not isinstance(answer, list | tuple) or not all(
        isinstance(fragment, KnowledgeFragment) for fragment in answer
    ):
        raise ProviderUnavailable(
            f"the knowledge provider answered with {type(answer).__name__}, not a list of "
            "KnowledgeFragment."
        )
    try:
        return tuple(fragment.to_retrieved() for fragment in answer)
    except TypeError as exc:
        raise ProviderUnavailable(
            f"the knowledge provider returned a malformed fragment: {exc}"
        ) from exc
