"""The shared strict decoder: the JSON it refuses, and the types it holds plain values to."""

from __future__ import annotations

import math
from typing import Annotated, Any

import msgspec
import pytest

from bridge.wire import Sha256Hex, WireError, decode, parse_json


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b'{"a": 1, "a": 2}', "repeats a key"),
        (b'{"a": [{"b": 1, "c": {"d": 1, "d": 1}}]}', "repeats a key"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "-Infinity"),
        (b"[" * 100_000 + b"]" * 100_000, "not a JSON document"),
        (b'{"a": 1} x', "not a JSON document"),
        (b'{"a": "\xff"}', "not UTF-8"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8"),
    ],
)
def test_json_that_parsers_read_differently_is_refused(raw: bytes, detail: str) -> None:
    with pytest.raises(WireError) as refused:
        parse_json(raw)
    assert detail in refused.value.detail


def test_numbers_are_json_numbers_and_schema_integers_on_request() -> None:
    plain: Any = parse_json(b"[5.0, 5, 1e2]")
    assert plain == [5.0, 5, 100.0] and [type(n) for n in plain] == [float, int, float]
    schema: Any = parse_json(b"[5.0, 1e2, 2.5, 1e999]", schema_integers=True)
    assert schema[:3] == [5, 100, 2.5] and [type(n) for n in schema[:2]] == [int, int]
    assert math.isinf(schema[3])


class _Sample(msgspec.Struct, forbid_unknown_fields=True):
    count: Annotated[int, msgspec.Meta(ge=1)]
    ratio: float
    flag: bool
    name: Annotated[str, msgspec.Meta(max_length=4)]
    digest: Sha256Hex


GOOD = {"count": 1, "ratio": 1, "flag": False, "name": "abcd", "digest": "ab" * 32}


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"count": True}, "count"),
        ({"count": 1.0}, "count"),
        ({"count": "1"}, "count"),
        ({"count": 0}, "count"),
        ({"ratio": True}, "ratio"),
        ({"ratio": "1.5"}, "ratio"),
        ({"flag": 0}, "flag"),
        ({"name": "abcde"}, "name"),
        ({"name": ["abcd"]}, "name"),
        ({"name": [[[[["deep"]]]]]}, "name"),
        ({"digest": "AB" * 32}, "digest"),
        ({"digest": "ab" * 32 + "\n"}, "digest"),
        ({"extra": 1}, ""),
    ],
)
def test_plain_values_are_held_to_exact_types_and_bounds(
    changes: dict[str, object], path: str
) -> None:
    with pytest.raises(WireError) as refused:
        decode({**GOOD, **changes}, _Sample)
    assert refused.value.path == path


def test_a_refusal_names_the_field_by_path_and_by_rule() -> None:
    with pytest.raises(WireError) as refused:
        decode([{**GOOD}, {**GOOD, "name": 5}], list[_Sample])
    assert (refused.value.path, refused.value.field) == ("[1].name", "[].name")
    assert decode(GOOD, _Sample).ratio == 1.0
    with pytest.raises(WireError) as missing:
        decode({k: v for k, v in GOOD.items() if k != "flag"}, _Sample)
    assert missing.value.path == "" and "flag" in missing.value.detail
