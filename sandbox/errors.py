"""The ways a sandboxed job can fail, as types the trusted side raises.

Only the parent raises these; a child answers with a code from ``sandbox/codes.py`` and the
parent raises the class carrying it (``BY_CODE``). See docs/sandbox.md, "Outcomes" and
"Notes by module".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from sandbox import codes

if TYPE_CHECKING:
    from collections.abc import Mapping


class SandboxError(Exception):
    """Root of every outcome of a sandboxed job other than extracted text.

    ``reported_as`` is what a caller is told failed: the class's name, unless a class only
    refines its parent for the trusted side's own decisions.
    ``transient``: the host failed, not the document, so another attempt may succeed.
    """

    reported_as: ClassVar[str] = "SandboxError"
    transient: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "reported_as" not in cls.__dict__:
            cls.reported_as = cls.__name__

    #: The code a child answers with for this outcome (``sandbox/codes.py``); None when only
    #: the parent can conclude it (from a kill, a timeout, a broken answer).
    code: ClassVar[str | None] = None
    #: The limit that stopped the job, as the ``cause`` label of the worker's kill metric;
    #: None when the outcome is not the sandbox stopping the job.
    kill_cause: ClassVar[str | None] = None


class ParserError(SandboxError):
    """The parser raised an exception on this document (e.g. "parser raised ValueError: ...")."""

    code = codes.PARSER


class WallClockExceeded(SandboxError):
    """The job ran past the wall-clock limit and its process group was killed."""

    kill_cause = "wall_clock"


class CpuLimitExceeded(SandboxError):
    """The job used its CPU-seconds budget (SIGXCPU, or SIGKILL at the hard limit)."""

    kill_cause = "cpu"


class MemoryLimitExceeded(SandboxError):
    """The job hit its address-space limit, or was killed with evidence of memory exhaustion."""

    code = codes.MEMORY
    kill_cause = "memory"


class ProcessLimitExceeded(SandboxError):
    """The job ran, or asked to start, more processes and threads at once than its limit
    allows (however they were parented)."""

    kill_cause = "processes"


class ChildCrashed(SandboxError):
    """The child died from a signal that no limit of ours explains (e.g. SIGSEGV in C code)."""

    kill_cause = "signal"


class KilledFromOutside(ChildCrashed):
    """A SIGKILL none of the sandbox's limits sent: the kernel's OOM killer, an operator.

    Callers are told the ``ChildCrashed`` it is; a queue tries the job again, since the host
    failed, not the document (a parser that SIGKILLs itself looks the same, so only a few times).
    """

    reported_as = ChildCrashed.reported_as
    transient = True


class ForbiddenOperation(SandboxError):
    """The seccomp filter killed the child (SIGSYS) for a system call it may not make."""

    kill_cause = "forbidden_syscall"


class Withdrawn(SandboxError):
    """The caller withdrew the job while its child ran, and the child's process group was
    killed: nobody would have read its answer (``airlock serve``'s DELETE)."""


class NoAnswer(SandboxError):
    """The child exited without writing an answer."""


class OutputTooLarge(SandboxError):
    """The child's answer announced or sent more bytes than the output limit allows."""

    kill_cause = "output_cap"


class MalformedAnswer(SandboxError):
    """The child's answer is not a well-formed, well-typed answer frame."""


class CeilingExceeded(SandboxError):
    """The document breaks a parse ceiling (pages, pixels, text); refused whole, never cut."""

    code = codes.CEILING


class OcrRequired(SandboxError):
    """The document can only be read by OCR, and this job ran with OCR turned off."""

    code = codes.NEEDS_OCR


class SplitRequired(OcrRequired):
    """As :class:`OcrRequired`, for a scan long enough to be read in pages (sandbox/pages.py):
    said at its first page to OCR, before that page is checked or rendered (its page job
    will), so that only a document worth splitting costs the split's extra child."""

    code = codes.NEEDS_SPLIT


class UnreadableInput(SandboxError):
    """The parser recognised the bytes as not a readable document of the declared kind."""

    code = codes.UNREADABLE


class UnreadableText(SandboxError):
    """The document was read, but its text is not readable: mojibake, broken glyph mappings,
    or OCR junk (e.g. "94% of OCR'd letters are not in any script of the document's language
    (eng)"). Refused rather than handed to a model as if it were the document; a job with
    ``ParseLimits.admit_unreadable`` gets the text flagged instead."""

    code = codes.UNREADABLE_TEXT


class NoExtractor(SandboxError):
    """No parser is registered in the fork server for the requested kind."""

    code = codes.NO_EXTRACTOR


class SandboxUnavailable(SandboxError):
    """The sandbox cannot run jobs here: a required mechanism is missing or the fork server died.

    An infrastructure failure, not a verdict on the document: a queue may retry it elsewhere.
    """

    transient = True


def _subclasses(root: type[SandboxError]) -> list[type[SandboxError]]:
    return [leaf for cls in root.__subclasses__() for leaf in (cls, *_subclasses(cls))]


#: Every class below SandboxError, at any depth: what a caller may be told failed.
ALL_ERRORS: tuple[type[SandboxError], ...] = tuple(_subclasses(SandboxError))

#: The class the parent raises for each code a child may answer with.
BY_CODE: Mapping[str, type[SandboxError]] = {
    cls.code: cls for cls in ALL_ERRORS if cls.code is not None
}
