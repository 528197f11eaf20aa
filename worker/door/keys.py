"""API keys: who may knock, stored as hashes only.

The keys file (``AIRLOCK_HTTP_KEYS_FILE``, a file or a mounted Kubernetes Secret) holds one key
per line, ``<name> <sha256 of the key, hex>``; ``#`` starts a comment. Only hashes are kept, so
the file, a backup or a leaked Secret does not hand out the keys themselves. A request names
its key as ``Authorization: Bearer <key>``; the key's name owns the jobs it submits.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
#: The owner of every job when the door runs without keys (loopback only).
LOCAL_OWNER = "local"


class KeysFileError(ValueError):
    """A keys file that cannot be read or holds a malformed line (named by its number)."""


def digest(key: str) -> str:
    """The hex SHA-256 a keys file stores for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiKeys:
    """Key digests by key name."""

    digests: Mapping[str, str]

    @classmethod
    def load(cls, path: Path) -> ApiKeys:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise KeysFileError(f"cannot read the keys file {path}: {exc}") from None
        digests: dict[str, str] = {}
        for number, line in enumerate(lines, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 2 or not _NAME.fullmatch(words[0]):
                raise KeysFileError(
                    f"{path} line {number}: expected '<name> <sha256 hex>' with a name of "
                    "letters, digits, '_', '.' or '-'"
                )
            name, hashed = words[0], words[1].lower()
            if not _DIGEST.fullmatch(hashed):
                raise KeysFileError(
                    f"{path} line {number}: {name}'s key must be given as its SHA-256, 64 hex "
                    "digits (printf %s KEY | sha256sum), never as the key itself"
                )
            if name in digests:
                raise KeysFileError(f"{path} line {number}: the name {name} is given twice")
            digests[name] = hashed
        if not digests:
            raise KeysFileError(f"the keys file {path} holds no key")
        return cls(digests)

    def owner(self, untrusted_authorization: str | None) -> str | None:
        """The name of the key an ``Authorization`` header carries, or None.

        Every stored digest is compared, in constant time each, so how long a refusal takes
        says nothing about which digest came close.
        """
        if untrusted_authorization is None:
            return None
        scheme, _, untrusted_key = untrusted_authorization.partition(" ")
        if scheme.lower() != "bearer" or not untrusted_key.strip():
            return None
        offered = digest(untrusted_key.strip())
        found = None
        for name, stored in self.digests.items():
            if hmac.compare_digest(offered, stored):
                found = name
        return found
