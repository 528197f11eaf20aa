"""Every Redis client of airlock, made from a URL in one place.

One place decides how a party reaches Redis: one server, or the master a set of Sentinels
watches; its timeouts; and for the parties whose work is under way when Redis goes away (a
worker's pool process mid-job), whether a command rides out a restart, a failover or a full
Redis instead of failing the job. Celery's own connections (broker, result backend) are
configured from the same reading of the URL (:func:`celery_endpoint`). See docs/queue.md
(Redis going away) and docs/operations.md (Redis: Sentinel).
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from redis import BlockingConnectionPool, Redis
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection

from bridge.knowledge.errors import BridgeContractError

#: How long a riding-out command keeps trying: longer than Redis takes to restart from its AOF
#: or a Sentinel to promote a replica, shorter than the time limits that would kill the job.
RIDE_OUT_SECONDS = 60.0
_RIDE_OUT_PAUSE_SECONDS = 1.0
#: The failures that pass: Redis gone (restarting, failing over: a Sentinel that names no
#: master yet raises a ConnectionError too) and Redis full (noeviction refuses writes until
#: memory is freed). Anything else is an answer, not a fault to wait out.
_PASSING_FAULTS = (RedisConnectionError, RedisTimeoutError, OutOfMemoryError)

#: One Redis server: TCP, TLS, or a Unix socket.
_SERVER_SCHEMES = frozenset({"redis", "rediss", "unix"})
#: The master a set of Sentinels watches, in kombu's grammar: ``sentinel://`` addresses joined
#: by ``;`` (kombu and Celery read the login and database of the first).
SENTINEL_SCHEME = "sentinel"
SENTINEL_PORT = 26379
#: What airlock reads from a Sentinel URL's query, and kombu and Celery never see: they take
#: these as transport options.
_SENTINEL_PARAMETERS = frozenset({"master_name", "sentinel_username", "sentinel_password"})
#: How long a question to one Sentinel may take: a hung one must not hold a reconnection, the
#: next Sentinel is asked instead.
_SENTINEL_TIMEOUT_SECONDS = 2.0

_CLUSTER_REFUSED = (
    "Redis Cluster is not supported: Celery's Redis transport cannot use it (celery#2852; a "
    "queue and its unacked hash live in different slots). Run one Redis, or a primary and "
    "replicas under Sentinel for failover (docs/operations.md#sentinel)"
)


def _asking_the_sentinels_on_every_connect() -> None:
    """Make every Sentinel-managed connection ask the Sentinels where the master is before it
    opens a socket, however it reconnects.

    redis-py asks them only in ``connect()``; a connection a command's own retry reconnects
    (``send_packed_command`` -> ``connect_check_health``) goes back to the address it last had
    (redis-py#3874). After a failover that is the dead primary: its retries are refused until
    a supervisor restarts it, and then it is a stale standalone master until the Sentinels
    demote it (10 s in the failover test): payloads read from it were missing, and what was
    written to it was lost. kombu's and Celery's Sentinel connections are redis-py's class too,
    so the class itself is mended, once, here.
    """
    original = getattr(SentinelManagedConnection, "connect_check_health", None)
    if original is None or getattr(original, "asks_the_sentinels", False):
        return  # older redis-py: reconnects go through connect(), which asks them

    def connect_check_health(
        self: SentinelManagedConnection,
        check_health: bool = True,
        retry_socket_connect: bool = True,
    ) -> None:
        if not self._sock and self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        original(self, check_health=check_health, retry_socket_connect=retry_socket_connect)

    connect_check_health.asks_the_sentinels = True  # type: ignore[attr-defined]
    SentinelManagedConnection.connect_check_health = connect_check_health  # type: ignore[method-assign,assignment]


_asking_the_sentinels_on_every_connect()


@dataclass(frozen=True)
class SentinelAddress:
    """The master named ``master_name`` by the Sentinels at ``sentinels``, with the login and
    database the master is used with and the login the Sentinels themselves ask for."""

    sentinels: tuple[tuple[str, int], ...]
    master_name: str
    db: int
    username: str | None
    password: str | None = field(repr=False)
    sentinel_username: str | None
    sentinel_password: str | None = field(repr=False)
    #: The URL as kombu and Celery read it: the addresses without airlock's query.
    celery_url: str = field(repr=False)

    def sentinel_login(self, timeout: float) -> dict[str, Any]:
        """How to connect to a Sentinel: its own login (a Sentinel is a server of its own, with
        its own users), timeouts (without them redis-py waits on a hung one for ever) and no
        retry (redis-py's default backs off for seconds on a dead Sentinel before asking the
        next one, which knows the same)."""
        login = {"username": self.sentinel_username, "password": self.sentinel_password}
        return {
            **{key: value for key, value in login.items() if value},
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "retry": Retry(NoBackoff(), 0),
        }


def _refuse_cluster_scheme(scheme: str) -> None:
    # rediscluster://, redis+cluster://, redis-cluster://: every spelling the client libraries
    # use names the cluster in the scheme.
    if "cluster" in scheme:
        raise BridgeContractError(f"{scheme}:// URL: {_CLUSTER_REFUSED}")


def _sentinel_address(url: str) -> SentinelAddress:
    parts = [urlsplit(part) for part in url.split(";") if part.strip()]
    query: dict[str, str] = {}
    for part in parts:
        if part.scheme != SENTINEL_SCHEME:
            raise BridgeContractError(
                f"a Sentinel URL lists sentinel:// addresses only, not {part.scheme}://"
            )
        for name, values in parse_qs(part.query, keep_blank_values=True).items():
            if name not in _SENTINEL_PARAMETERS:
                raise BridgeContractError(
                    f"a Sentinel URL takes {sorted(_SENTINEL_PARAMETERS)}, not {name!r}"
                )
            if (name in query and query[name] != values[-1]) or len(set(values)) > 1:
                raise BridgeContractError(f"a Sentinel URL gives {name} twice, differently")
            query[name] = values[-1]
    master_name = query.get("master_name", "")
    if not master_name:
        # kombu and Celery would ask the Sentinels for a master named None at the first
        # connection, long after the worker said it was ready.
        raise BridgeContractError(
            "a Sentinel URL names the master its Sentinels watch: ?master_name=NAME"
        )
    first = parts[0]
    logins = {(first.username, first.password), (None, None)}
    databases = {first.path.strip("/"), ""}
    if any(
        (part.username, part.password) not in logins or part.path.strip("/") not in databases
        for part in parts
    ):
        # kombu and Celery read the first address's alone: another's would be ignored.
        raise BridgeContractError(
            "a Sentinel URL's login and database are the first address's: every other "
            "address carries the same login and database, or none"
        )
    path = first.path.strip("/") or "0"
    if not path.isdigit():
        raise BridgeContractError(f"a Sentinel URL's database is a number, not {path!r}")
    try:
        sentinels = tuple((part.hostname or "", part.port or SENTINEL_PORT) for part in parts)
    except ValueError as exc:  # a port that is no number, or out of range
        raise BridgeContractError(f"a Sentinel URL's port: {exc}") from None
    if not all(host for host, _ in sentinels):
        raise BridgeContractError("every address of a Sentinel URL names a host")
    username = unquote(first.username) if first.username else None
    password = unquote(first.password) if first.password else None
    return SentinelAddress(
        sentinels=sentinels,
        master_name=master_name,
        db=int(path),
        username=username,
        password=password,
        # The Sentinels' login is the master's unless the URL says otherwise (an empty
        # sentinel_password: Sentinels that ask for none).
        sentinel_username=query.get("sentinel_username", username),
        sentinel_password=query.get("sentinel_password", password),
        celery_url=";".join(part._replace(query="").geturl() for part in parts),
    )


def redis_address(url: str) -> SentinelAddress | None:
    """How ``url`` reaches Redis: ``None`` for one server, the Sentinels' master otherwise.

    Raises :class:`BridgeContractError` for a Redis Cluster URL and for a Sentinel URL that
    cannot be followed (no master name, an unknown or contradictory parameter), so that a
    worker or a bridge configured so stops at start instead of at its first job.
    """
    scheme = urlsplit(url).scheme
    _refuse_cluster_scheme(scheme)
    if scheme == SENTINEL_SCHEME:
        return _sentinel_address(url)
    if scheme not in _SERVER_SCHEMES:
        raise BridgeContractError(
            f"{scheme or 'a schemeless'}:// is not Redis: redis://, rediss://, unix:// or "
            "sentinel:// (docs/configuration.md)"
        )
    return None


def names_redis(url: str) -> bool:
    """Whether ``url`` is a Redis airlock can use (a broker may also be RabbitMQ); raises
    :class:`BridgeContractError` for a Redis URL it refuses (:func:`redis_address`)."""
    scheme = urlsplit(url).scheme
    _refuse_cluster_scheme(scheme)
    if scheme in _SERVER_SCHEMES or scheme == SENTINEL_SCHEME:
        redis_address(url)
        return True
    return False


@dataclass(frozen=True)
class CeleryEndpoint:
    """What Celery's broker or result backend is given for a URL: the URL in kombu's and
    Celery's own grammar, and the transport options that grammar leaves out."""

    url: str = field(repr=False)
    transport_options: dict[str, Any]


def celery_endpoint(url: str) -> CeleryEndpoint:
    """``url`` for Celery: unchanged for one server (or RabbitMQ); for Sentinels, the master's
    name and the Sentinels' own login as transport options (``broker_transport_options``,
    ``result_backend_transport_options``)."""
    address = redis_address(url) if names_redis(url) else None
    if address is None:
        return CeleryEndpoint(url, {})
    return CeleryEndpoint(
        address.celery_url,
        {
            "master_name": address.master_name,
            "sentinel_kwargs": address.sentinel_login(_SENTINEL_TIMEOUT_SECONDS),
        },
    )


class _SentinelPool(SentinelConnectionPool):
    """A Sentinel master's pool whose close also closes its connections to the Sentinels: left
    open, one set per client made piles up on every Sentinel (kombu#1108)."""

    def close(self) -> None:
        super().close()
        self.sentinel_manager.close()


class _HeldSentinelPool(_SentinelPool, BlockingConnectionPool):
    """A Sentinel master's pool that opens at most ``max_connections`` and makes a thread that
    finds them all busy wait for one (bridge/service/connections.py says why)."""


def redis_client(
    url: str, *, timeout: float, ride_out: bool = False, held: int | None = None
) -> Redis:
    """A client of the Redis at ``url`` whose connects and replies wait ``timeout`` seconds.

    With ``ride_out``, a command that meets a passing fault is tried again with backoff (at
    most a second apart) for about :data:`RIDE_OUT_SECONDS`, then raises as it would have.
    With ``held``, the client opens at most that many connections, and a thread that finds
    them all busy waits up to ``timeout`` for one rather than opening another.

    For a Sentinel URL every new connection asks the Sentinels where the master is, so a
    command retried after a failover reaches the promoted replica, never the dead address.
    """
    options: dict[str, Any] = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    if ride_out:
        options["retry"] = Retry(
            ExponentialWithJitterBackoff(cap=_RIDE_OUT_PAUSE_SECONDS, base=0.05),
            # Full jitter averages half the cap once the backoff is capped.
            retries=int(RIDE_OUT_SECONDS / (_RIDE_OUT_PAUSE_SECONDS / 2)),
            supported_errors=_PASSING_FAULTS,
        )
        options["retry_on_error"] = list(_PASSING_FAULTS)
    if held is not None:
        options.update(max_connections=held, timeout=timeout)
    return _client(url, options, timeout, held=held is not None)


def _client(url: str, options: dict[str, Any], timeout: float, *, held: bool) -> Redis:
    address = redis_address(url)
    if address is None:
        if not held:
            return Redis.from_url(url, **options)
        return Redis.from_pool(BlockingConnectionPool.from_url(url, **options))
    # redis-py before 8.2 leaves Sentinel untyped; the ignore covers both.
    sentinel = Sentinel(  # type: ignore[no-untyped-call,unused-ignore]
        list(address.sentinels), sentinel_kwargs=address.sentinel_login(timeout)
    )
    login = {"username": address.username, "password": address.password}
    connection: dict[str, Any] = {key: value for key, value in login.items() if value}
    master: Redis = sentinel.master_for(  # type: ignore[no-untyped-call,unused-ignore]
        address.master_name,
        db=address.db,
        **connection,
        **options,
        connection_pool_class=_HeldSentinelPool if held else _SentinelPool,
    )
    return master


def refuse_cluster(url: str, timeout: float) -> None:
    """Raise :class:`BridgeContractError` if the Redis at ``url`` is a node of a Redis Cluster.

    A cluster URL is refused by its scheme; this catches a cluster node given as a plain
    ``redis://`` one. A Redis that does not answer within ``timeout`` (asked once, no retry)
    says nothing either way: the caller goes on, and rides out the outage as it would anyway,
    rather than refuse to start for it.
    """
    options = {
        "socket_connect_timeout": timeout,
        "socket_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    with closing(_client(url, options, timeout, held=False)) as redis:
        try:
            info = redis.info("cluster")
        except RedisError:
            return
    if info.get("cluster_enabled") == 1:
        raise BridgeContractError(f"the Redis at this URL runs in cluster mode. {_CLUSTER_REFUSED}")
