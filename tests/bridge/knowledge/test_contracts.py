"""ContextContribution.validate, ordering, scopes and the spec projection."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import (
    BridgeContractError,
    ContextContribution,
    ContextLayer,
    ContextRead,
    ContextRequest,
    ContextScope,
    ContextTier,
    IngestSelection,
    KnowledgeBridgeError,
    StaticContextSource,
    contribution_spec,
    layer_index,
    ordering_key,
    resolve_scope,
)

SOURCE = StaticContextSource(text="hello")


@dataclass(frozen=True)
class ScopedSource:
    scope_aware: bool = True

    def read(self, request: ContextRequest) -> ContextRead:
        return ContextRead(text=request.scope_path)


class NoRead:
    read = "not callable"


def test_valid_declaration_passes() -> None:
    ContextContribution(contribution_id="kb.main-1", source=SOURCE).validate()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"contribution_id": ""}, "non-empty contribution_id"),
        ({"contribution_id": "a b"}, "outside the permitted charset"),
        ({"contribution_id": "a/b"}, "outside the permitted charset"),
        ({"contribution_id": "</untrusted>"}, "outside the permitted charset"),
        ({"contribution_id": "ok\n"}, "outside the permitted charset"),
        ({"source": NoRead()}, "has no callable read()"),
        ({"source": object()}, "has no callable read()"),
        ({"tier": ContextTier.SYSTEM}, "authored tier 'system'"),
        ({"tier": ContextTier.OPERATOR}, "authored tier 'operator'"),
        ({"layer": ContextLayer.L0}, "declares layer L0"),
        ({"pinned": True}, "declares itself pinned"),
        ({"scope": ContextScope.TENANT}, "is not scope_aware"),
    ],
)
def test_every_refusal_has_its_reason(kwargs: dict[str, object], fragment: str) -> None:
    fields: dict[str, object] = {"contribution_id": "c1", "source": SOURCE}
    fields.update(kwargs)
    contribution = ContextContribution(**fields)  # type: ignore[arg-type]
    with pytest.raises(BridgeContractError, match=None) as info:
        contribution.validate()
    assert fragment in str(info.value)
    assert isinstance(info.value, KnowledgeBridgeError)


def test_scope_aware_source_may_declare_tenant_scope() -> None:
    ContextContribution("c1", ScopedSource(), scope=ContextScope.TENANT).validate()


def test_spec_validates_first_and_emits_strings() -> None:
    with pytest.raises(BridgeContractError):
        contribution_spec(ContextContribution("c1", SOURCE, pinned=True))
    spec = contribution_spec(ContextContribution("c1", SOURCE, layer=ContextLayer.L1, order=3))
    assert spec["layer"] == "L1" and type(spec["layer"]) is str
    assert spec["tier"] == "session" and spec["scope"] == "deployment"
    assert spec["order"] == 3 and spec["source"] is SOURCE
    with pytest.raises(TypeError):
        spec["order"] = 4  # type: ignore[index]


def test_resolve_scope() -> None:
    assert resolve_scope(None) is ContextScope.DEPLOYMENT
    assert resolve_scope("tenant") is ContextScope.TENANT
    with pytest.raises(BridgeContractError, match="is not a context scope") as info:
        resolve_scope("tenant-a")
    assert isinstance(info.value.__cause__, ValueError)


def test_layer_ladder() -> None:
    assert [layer_index(layer) for layer in ContextLayer] == [0, 1, 2]


contributions = st.builds(
    ContextContribution,
    contribution_id=st.text(alphabet="abc.-_1", min_size=1, max_size=4),
    source=st.just(SOURCE),
    layer=st.sampled_from(list(ContextLayer)),
    order=st.integers(-3, 3),
)


@given(st.lists(contributions, max_size=12), st.randoms())
def test_ordering_key_is_a_total_order(items: list[ContextContribution], rnd: object) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert [ordering_key(c) for c in sorted(items, key=ordering_key)] == [
        ordering_key(c) for c in sorted(shuffled, key=ordering_key)
    ]
    for a, b in itertools.combinations(items, 2):
        ka, kb = ordering_key(a), ordering_key(b)
        assert (ka < kb) or (kb < ka) or (ka == kb and a.contribution_id == b.contribution_id)


def test_ingest_selection_reads_as_untrusted() -> None:
    read = IngestSelection(text="t", revision="r", dropped=(("x", "why"),)).as_read()
    assert read == ContextRead(text="t", revision="r", untrusted=True)
    assert ContextRead(text="t").untrusted is True
    assert SOURCE.read(ContextRequest("c1")).untrusted is True
