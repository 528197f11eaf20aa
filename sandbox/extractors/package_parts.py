"""Reading one part of a ZIP package, and parsing it as XML under the one policy.

Every XML part a package reader parses here goes through :func:`xml_part`: no DTD loaded, no
entity resolved, no network, libxml2's depth and size limits kept, and a part that declares a
DOCTYPE at all refused, since with entities never expanded a DTD could only hide text from the
reader. A part is read up to :data:`MAX_PART_BYTES`: the archive guard bounds a package before
dispatch, and this bounds a child handed one without it. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from sandbox import codes
from sandbox.extractors.registry import Refusal

MAX_PART_BYTES = 64 << 20
_PARSER_OPTIONS = {
    "resolve_entities": False,
    "load_dtd": False,
    "no_network": True,
    "huge_tree": False,
    "remove_comments": True,
    "remove_pis": True,
}
#: What zipfile raises on a member it cannot read: damaged, encrypted (RuntimeError: "password
#: required"), or compressed in a way it does not know.
MEMBER_ERRORS = (
    zipfile.BadZipFile,
    EOFError,
    ValueError,
    NotImplementedError,
    OSError,
    RuntimeError,
)


class MissingPart(Refusal):
    """The package lists no member of that name."""


def opened(payload: bytes, what: str) -> zipfile.ZipFile:
    """The package as a ZIP archive; ``what`` names it in the refusal when it is not one."""
    try:
        return zipfile.ZipFile(io.BytesIO(payload))
    except (*MEMBER_ERRORS, zipfile.LargeZipFile) as exc:
        raise Refusal(codes.UNREADABLE, f"the {what} is not a readable ZIP package: {exc}") from exc


def member(archive: zipfile.ZipFile, name: str) -> bytes:
    """The bytes of member ``name``, refused past :data:`MAX_PART_BYTES`."""
    try:
        with archive.open(name) as part:
            data = part.read(MAX_PART_BYTES + 1)
    except KeyError as exc:
        raise MissingPart(codes.UNREADABLE, f"the package has no {name}") from exc
    except MEMBER_ERRORS as exc:
        raise Refusal(codes.UNREADABLE, f"{name} cannot be read: {exc}") from exc
    if len(data) > MAX_PART_BYTES:
        raise Refusal(codes.CEILING, f"{name} is over {MAX_PART_BYTES >> 20} MiB")
    return data


def xml_parser() -> etree.XMLParser:
    """A parser under the one XML policy (a DOCTYPE is for the caller to judge)."""
    return etree.XMLParser(**_PARSER_OPTIONS)


def xml_part(data: bytes, name: str) -> etree._Element:
    """``data`` parsed under the one XML policy; ``name`` is said in a refusal."""
    try:
        tree = etree.parse(io.BytesIO(data), xml_parser())
    except etree.XMLSyntaxError as exc:
        raise Refusal(codes.UNREADABLE, f"{name} is not well-formed: {exc}") from exc
    if tree.docinfo.doctype:
        raise Refusal(codes.UNREADABLE, f"{name} declares a DTD, which airlock does not read")
    return tree.getroot()
