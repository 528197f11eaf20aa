"""knowledge_sources: a source only where one can produce something, policies forwarded as given."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource, ExtractionLimits
from bridge.knowledge.contracts import ContextSource, StaticContextSource
from bridge.knowledge.documents import DocumentPolicy, DocumentSource, StoredDocument
from bridge.knowledge.errors import BridgeContractError
from bridge.knowledge.factory import knowledge_sources
from bridge.knowledge.retrieval import KnowledgeSource, RetrievalPolicy, RetrievedFragment


class Retriever:
    def retrieve(self, query: str, *, limit: int) -> Sequence[RetrievedFragment]:
        return ()


class Store:
    def fetch(self, document_id: str) -> StoredDocument | None:
        return None


class Extractor:
    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        return "text"


REF = AttachmentRef(label="a.txt", kind="text", media_type="text/plain", payload=b"hi")


def test_nothing_given_builds_nothing() -> None:
    assert knowledge_sources() == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retriever": Retriever()},
        {"retriever": Retriever(), "query": "  \n"},
        {"query": "what is leave?"},
        {"store": Store()},
        {"document_ids": ["a"]},
        {"attachments": [REF]},
        {"extractor": Extractor()},
        {"context": " \t\n"},
    ],
)
def test_an_input_that_cannot_produce_anything_adds_no_source(kwargs: dict[str, object]) -> None:
    assert knowledge_sources(**kwargs) == ()  # type: ignore[arg-type]


def test_every_source_in_a_fixed_order_with_its_own_defaults() -> None:
    retriever, store, extractor = Retriever(), Store(), Extractor()
    sources = knowledge_sources(
        retriever=retriever,
        query="q",
        store=store,
        document_ids=["a", "b"],
        attachments=[REF],
        extractor=extractor,
        context="  always  ",
    )
    knowledge, documents, attachments, static = sources
    assert isinstance(knowledge, KnowledgeSource)
    assert (knowledge.retriever, knowledge.query, knowledge.policy) == (
        retriever,
        "q",
        RetrievalPolicy(),
    )
    assert isinstance(documents, DocumentSource)
    assert (documents.store, documents.document_ids, documents.policy) == (
        store,
        ("a", "b"),
        DocumentPolicy(),
    )
    assert isinstance(attachments, AttachmentSource)
    assert (attachments.refs, attachments.extractor, attachments.limits) == (
        (REF,),
        extractor,
        ExtractionLimits(),
    )
    assert static == StaticContextSource(text="always")
    assert all(isinstance(source, ContextSource) for source in sources)


def test_each_policy_reaches_its_own_source_as_the_same_object() -> None:
    policy, document_policy, limits = (
        RetrievalPolicy(limit=9),
        DocumentPolicy(max_total_chars=5),
        ExtractionLimits(max_pages=2),
    )
    knowledge, documents, attachments = knowledge_sources(
        retriever=Retriever(),
        query="q",
        store=Store(),
        document_ids=["a"],
        attachments=[REF],
        extractor=Extractor(),
        policy=policy,
        document_policy=document_policy,
        limits=limits,
    )
    assert isinstance(knowledge, KnowledgeSource) and knowledge.policy is policy
    assert isinstance(documents, DocumentSource) and documents.policy is document_policy
    assert isinstance(attachments, AttachmentSource) and attachments.limits is limits


def test_a_policy_given_as_none_leaves_the_default() -> None:
    (knowledge,) = knowledge_sources(retriever=Retriever(), query="q", policy=None)
    assert isinstance(knowledge, KnowledgeSource)
    assert knowledge.policy == RetrievalPolicy()


def test_a_policy_for_a_source_not_built_is_accepted() -> None:
    assert knowledge_sources(context="x", document_policy=DocumentPolicy()) == (
        StaticContextSource(text="x"),
    )


@pytest.mark.parametrize("keyword", ["polcy", "document_policies", "limit", "retrieval_policy"])
def test_a_misspelt_policy_keyword_is_refused(keyword: str) -> None:
    with pytest.raises(BridgeContractError, match=keyword):
        knowledge_sources(retriever=Retriever(), query="q", **{keyword: RetrievalPolicy()})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("policy", DocumentPolicy()),
        ("document_policy", RetrievalPolicy()),
        ("limits", RetrievalPolicy()),
        ("policy", {"limit": 3}),
    ],
)
def test_a_policy_of_the_wrong_type_is_refused(keyword: str, value: object) -> None:
    with pytest.raises(BridgeContractError, match=keyword):
        knowledge_sources(**{keyword: value})  # type: ignore[arg-type]


def test_a_bare_string_of_document_ids_is_refused_not_split() -> None:
    with pytest.raises(BridgeContractError):
        knowledge_sources(store=Store(), document_ids="abc")
