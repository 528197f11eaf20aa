"""The one table of error codes (sandbox/codes.py) and the classes that carry them agree."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from sandbox import codes, protocol, verdict
from sandbox.errors import ALL_ERRORS, BY_CODE, MalformedAnswer, ParserError
from sandbox.limits import MIB, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(memory_bytes=512 * MIB, cpu_seconds=5, wall_seconds=10.0)


def test_every_code_is_carried_by_exactly_one_class() -> None:
    # BY_CODE is a dict: a second class with the same code would silently replace the first.
    carried = Counter(cls.code for cls in ALL_ERRORS if cls.code is not None)
    assert set(carried) == codes.ALL
    assert all(count == 1 for count in carried.values()), carried


@pytest.mark.parametrize("code", sorted(codes.ALL))
def test_each_code_round_trips_through_the_verdict_to_its_class(code: str) -> None:
    body = protocol.encode_error_answer(code, "Refusal", "why")[protocol.LENGTH.size :]
    answer = protocol.decode_answer(body, parts=False)
    assert isinstance(answer, protocol.ErrorAnswer)
    error = verdict.from_error_answer(answer, LIMITS)
    assert type(error) is BY_CODE[code]
    assert error.code == code


def test_the_verdict_keeps_its_reasons() -> None:
    def outcome(code: str) -> str:
        return str(verdict.from_error_answer(protocol.ErrorAnswer(code, "Kind", "why"), LIMITS))

    assert outcome(codes.CEILING) == "why"
    assert outcome(codes.PARSER) == "parser raised Kind: why"
    assert outcome(codes.MEMORY) == (
        "the parser ran out of memory under the 512 MiB address-space limit (Kind: why)"
    )
    unknown = verdict.from_error_answer(protocol.ErrorAnswer("odd", "Kind", "why"), LIMITS)
    assert type(unknown) is ParserError and str(unknown) == "parser raised Kind: why"


def test_a_code_outside_the_table_is_a_malformed_answer() -> None:
    body = protocol.encode_error_answer("wall_clock", "Refusal", "lie")[protocol.LENGTH.size :]
    with pytest.raises(MalformedAnswer, match="unknown error code 'wall_clock'"):
        protocol.decode_answer(body, parts=False)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, warm_children=1, modules=PROBE_MODULES) as sandbox:
        yield sandbox


@pytest.mark.parametrize("code", sorted(codes.REFUSALS))
def test_every_refusal_a_child_sends_arrives_as_its_class(runner: SandboxRunner, code: str) -> None:
    with pytest.raises(BY_CODE[code], match=rf"^refused by probe \({code}\)$"):
        runner.run("probe-refuse", "text/plain", code.encode())


@pytest.mark.parametrize("code", sorted(codes.ALL - codes.REFUSALS))
def test_a_refusal_with_a_code_the_child_may_not_refuse_with_is_a_parser_error(
    runner: SandboxRunner, code: str
) -> None:
    with pytest.raises(ParserError, match=rf"^parser raised Refusal: refused by probe \({code}\)$"):
        runner.run("probe-refuse", "text/plain", code.encode())
