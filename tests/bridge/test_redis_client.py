"""How a Redis URL is read (bridge/redis_client.py): one server, or the master a set of
Sentinels watches, in kombu's grammar plus the master's name; Redis Cluster refused by its
scheme. The clients themselves are tested against real servers and Sentinels in
tests/integration/test_sentinel_failover.py."""

from __future__ import annotations

import pytest

from bridge.knowledge.errors import BridgeContractError
from bridge.redis_client import (
    SentinelAddress,
    celery_endpoint,
    names_redis,
    redis_address,
)

SENTINELS = (
    "sentinel://worker:s%40cret@s1.example:26380/2;sentinel://s2.example/2;"
    "sentinel://[::1]:26381?master_name=airlock"
)


def _address(url: str) -> SentinelAddress:
    address = redis_address(url)
    assert address is not None
    return address


def test_a_sentinel_url_names_every_sentinel_the_master_and_its_login() -> None:
    address = _address(SENTINELS)
    assert address.sentinels == (("s1.example", 26380), ("s2.example", 26379), ("::1", 26381))
    assert address.master_name == "airlock"
    assert (address.db, address.username, address.password) == (2, "worker", "s@cret")
    # Unless the URL says otherwise, the Sentinels are logged in to as the master is.
    login = address.sentinel_login(1.5)
    assert (login["username"], login["password"]) == ("worker", "s@cret")
    assert login["socket_timeout"] == login["socket_connect_timeout"] == 1.5
    assert "s@cret" not in repr(address) and "s%40cret" not in repr(address)


def test_the_sentinels_may_have_a_login_of_their_own_or_none() -> None:
    own = _address(SENTINELS + "&sentinel_username=probe&sentinel_password=p2")
    assert (own.sentinel_username, own.sentinel_password) == ("probe", "p2")
    assert (own.username, own.password) == ("worker", "s@cret")
    none = _address(SENTINELS + "&sentinel_password=")
    assert "password" not in none.sentinel_login(1.0)


def test_celery_gets_kombus_own_grammar_and_the_rest_as_transport_options() -> None:
    """kombu and Celery read ``sentinel://a;sentinel://b`` and take the master's name and the
    Sentinels' login as transport options; airlock's query never reaches them (Celery's
    backend would pass an unknown parameter to every connection)."""
    endpoint = celery_endpoint(SENTINELS)
    assert endpoint.url == (
        "sentinel://worker:s%40cret@s1.example:26380/2;sentinel://s2.example/2;"
        "sentinel://[::1]:26381"
    )
    assert endpoint.transport_options["master_name"] == "airlock"
    assert endpoint.transport_options["sentinel_kwargs"]["password"] == "s@cret"
    for plain in ("redis://:pw@r:6390/1", "amqp://guest@rabbit//", "unix:///run/redis.sock"):
        assert celery_endpoint(plain).url == plain
        assert celery_endpoint(plain).transport_options == {}


@pytest.mark.parametrize(
    ("url", "redis"),
    [
        ("redis://r:6390/0", True),
        ("rediss://r:6380/0", True),
        ("unix:///run/redis.sock?db=1", True),
        ("sentinel://s1?master_name=m", True),
        ("amqp://guest@rabbit//", False),
        ("memory://", False),
    ],
)
def test_which_urls_are_redis(url: str, redis: bool) -> None:
    """What decides whether admission, the reconciler and the workers' announcements run: a
    Sentinel broker is a Redis broker (with it, none of them may silently switch off)."""
    assert names_redis(url) is redis


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("rediscluster://r:7000/0", "celery#2852"),
        ("redis+cluster://r:7000/0", "Cluster is not supported"),
        ("redis-cluster://r", "Cluster is not supported"),
        ("sentinel://s1:26379;sentinel://s2:26379", "master_name"),
        ("sentinel://s1?master_name=", "master_name"),
        ("sentinel://s1?master_name=a;sentinel://s2?master_name=b", "twice"),
        ("sentinel://s1?master_name=a&master_name=b", "twice"),
        ("sentinel://s1?master=a", "not 'master'"),
        ("sentinel://a:x@s1/0;sentinel://b:y@s2/0?master_name=m", "same login"),
        ("sentinel://s1/0;sentinel://s2/1?master_name=m", "same login and database"),
        ("sentinel://s1;sentinel://a:x@s2?master_name=m", "the first address's"),
        ("sentinel://s1/zero?master_name=m", "number"),
        ("sentinel://s1:port?master_name=m", "port"),
        ("sentinel://s1;redis://r:6390?master_name=m", "sentinel:// addresses only"),
        ("sentinel://:26379?master_name=m", "names a host"),
    ],
)
def test_urls_no_party_could_follow_are_refused(url: str, reason: str) -> None:
    with pytest.raises(BridgeContractError, match=reason):
        names_redis(url)
    with pytest.raises(BridgeContractError, match=reason):
        celery_endpoint(url)


def test_a_url_that_is_not_redis_is_refused_where_redis_is_needed() -> None:
    with pytest.raises(BridgeContractError, match="not Redis"):
        redis_address("amqp://guest@rabbit//")
