"""Which setting raises which per-file ceiling, and how a refusal says so.

Every refusal by a ceiling names the ``ExtractionLimits`` field, the ``airlock extract`` flag,
the environment variable and the value that admits the file. The names are defined here once,
so the names a reason gives are names that work (docs/configuration.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class CeilingSetting:
    """One ceiling's names: the limits field, the CLI flag (None: no flag) and the variable."""

    field: str
    flag: str | None
    variable: str
    help: str

    def to_admit(self, value: float | None = None, *, at_least: bool = False) -> str:
        """``raise FIELD (FLAG VALUE, VARIABLE=VALUE)``; ``N`` where the value is unknown.

        ``at_least`` says the file needs at least ``value`` and maybe more (the parser stopped
        counting at the first excess, or another part of the file may need more still).
        """
        shown = "N" if value is None else _number(value)
        where = [f"{self.flag} {shown}"] if self.flag else []
        where.append(f"{self.variable}={shown}")
        amount = f" to at least {shown}" if at_least and value is not None else ""
        return f"raise {self.field}{amount} ({', '.join(where)})"


def _number(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{math.ceil(value * 10) / 10:g}"
    return str(int(value))


def _setting(field: str, help: str) -> CeilingSetting:
    return CeilingSetting(field, "--" + field.replace("_", "-"), "AIRLOCK_" + field.upper(), help)


#: Every ``ExtractionLimits`` field, by name. All are per file except ``max_total_chars``.
EXTRACTION_SETTINGS: Mapping[str, CeilingSetting] = MappingProxyType(
    {
        setting.field: setting
        for setting in (
            _setting("max_bytes", "bytes of one uploaded file"),
            _setting(
                "max_uncompressed_bytes",
                "declared uncompressed bytes of one archive; bytes an e-mail's files decode to",
            ),
            _setting("max_expansion_ratio", "uncompressed:compressed ratio of an archive"),
            _setting("max_members", "members of one archive; files read from one e-mail"),
            _setting(
                "max_nesting_depth",
                "archives inside an archive, e-mails or ZIPs inside an e-mail or ZIP (1: none)",
            ),
            _setting(
                "max_pages",
                "pages, frames, sheets or slides of one document, embedded images OCR'd",
            ),
            _setting("max_text_chars", "characters of text extracted from one file"),
            _setting("max_total_chars", "characters of the whole selection"),
        )
    }
)

#: The pixel ceiling of one decoded image is the sandbox's (``ParseLimits.max_pixels``): a
#: deployment's memory budget, so queued jobs never carry it; the CLI's local extraction takes
#: it as a flag as well.
PIXELS = CeilingSetting(
    "max_pixels", "--max-pixels", "AIRLOCK_MAX_PIXELS", "pixels of one decoded image"
)

#: The sandbox's kernel-enforced limits (``SandboxLimits``), by the error type that reports
#: them. A deployment's settings, not a call's: no flag, and no value is known to suffice.
SANDBOX_SETTINGS: Mapping[str, CeilingSetting] = MappingProxyType(
    {
        "WallClockExceeded": CeilingSetting(
            "wall_seconds", None, "AIRLOCK_SANDBOX_WALL_SECONDS", "wall-clock seconds of a job"
        ),
        "CpuLimitExceeded": CeilingSetting(
            "cpu_seconds", None, "AIRLOCK_SANDBOX_CPU_SECONDS", "CPU seconds of a job"
        ),
        "MemoryLimitExceeded": CeilingSetting(
            "memory_bytes", None, "AIRLOCK_SANDBOX_MEMORY_MB", "address space of a job, in MiB"
        ),
        "OutputTooLarge": CeilingSetting(
            "output_bytes", None, "AIRLOCK_SANDBOX_OUTPUT_BYTES", "bytes of a job's answer"
        ),
    }
)

# The sandbox's ceiling refusals, as its parsers word them (sandbox/extractors). A count before
# "pages" is exact; "more than N" means the parser stopped counting past the ceiling.
_PAGES = re.compile(r"^(more than )?(\d+) .*?exceeds the (\d+)-page ceiling")
_TEXT = re.compile(r"^more than (\d+) characters of text exceeds the (\d+)-character ceiling")
_PIXELS = re.compile(r"(\d+) pixels exceeds the (\d+)-pixel ceiling|pixel ceiling is (\d+)")


def explain_failure(type_name: str, message: str) -> str:
    """The hint a sandbox failure's reason ends with (``"; raise ..."``), or ``""``."""
    if type_name == "CeilingExceeded":
        return explain_sandbox_ceiling(message)
    setting = SANDBOX_SETTINGS.get(type_name)
    return "; " + setting.to_admit() if setting is not None else ""


def explain_sandbox_ceiling(message: str) -> str:
    """The hint for a sandbox ``CeilingExceeded`` reason: ``"; raise ..."``, or ``""`` for a
    ceiling no setting raises (pypdf's own safety limits).

    Read from the reason's wording because only an error code and a sentence cross the
    process boundary; a reason this does not recognise keeps its words and gets no hint.
    """
    pages = _PAGES.match(message)
    if pages is not None:
        more, count = pages.group(1), int(pages.group(2))
        setting = EXTRACTION_SETTINGS["max_pages"]
        return "; " + (
            setting.to_admit(count + 1, at_least=True) if more else setting.to_admit(count)
        )
    text = _TEXT.match(message)
    if text is not None:
        counted = int(text.group(1))
        return "; " + EXTRACTION_SETTINGS["max_text_chars"].to_admit(counted + 1, at_least=True)
    pixels = _PIXELS.search(message)
    if pixels is not None:
        exact = pixels.group(1)
        return "; " + (PIXELS.to_admit(int(exact)) if exact else PIXELS.to_admit())
    return ""
