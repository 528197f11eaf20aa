"""The ways a sandboxed job can fail, as types the trusted side raises.

Only the parent raises these. The child never sends an exception object across the boundary
(that would mean unpickling attacker-shaped data); it sends an error code, and the parent picks
the class here. Every class carries a sentence naming what happened, so a caller that only sees
``f"{type(exc).__name__}: {exc}"`` still learns why the document was not extracted.
"""

from __future__ import annotations

from typing import ClassVar


class SandboxError(Exception):
    """Root of every outcome of a sandboxed job other than extracted text.

    ``code`` is what a caller is told failed and what crosses a process boundary: the class's
    name, unless a class only refines its parent for the trusted side's own decisions.
    ``transient``: the host failed, not the document, so another attempt may succeed.
    """

    code: ClassVar[str] = "SandboxError"
    transient: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            cls.code = cls.__name__


class ParserError(SandboxError):
    """The parser raised an exception on this document (e.g. "parser raised ValueError: ...")."""


class WallClockExceeded(SandboxError):
    """The job ran past the wall-clock limit and its process group was killed."""


class CpuLimitExceeded(SandboxError):
    """The job used its CPU-seconds budget (SIGXCPU, or SIGKILL at the hard limit)."""


class MemoryLimitExceeded(SandboxError):
    """The job hit its address-space limit, or was killed with evidence of memory exhaustion."""


class ProcessLimitExceeded(SandboxError):
    """The job ran more processes and threads at once than its limit allows."""


class ChildCrashed(SandboxError):
    """The child died from a signal that no limit of ours explains (e.g. SIGSEGV in C code)."""


class KilledFromOutside(ChildCrashed):
    """A SIGKILL none of the sandbox's limits sent: the kernel's OOM killer, an operator.

    Callers are told the ``ChildCrashed`` it is; a queue tries the job again, since the host
    failed, not the document (a parser that SIGKILLs itself looks the same, so only a few times).
    """

    code = ChildCrashed.code
    transient = True


class ForbiddenOperation(SandboxError):
    """The seccomp filter killed the child (SIGSYS) for a system call it may not make."""


class NoAnswer(SandboxError):
    """The child exited without writing an answer."""


class OutputTooLarge(SandboxError):
    """The child's answer announced or sent more bytes than the output limit allows."""


class MalformedAnswer(SandboxError):
    """The child's answer is not a well-formed, well-typed answer frame."""


class CeilingExceeded(SandboxError):
    """The document breaks a parse ceiling (pages, pixels, text); refused whole, never cut."""


class OcrRequired(SandboxError):
    """The document can only be read by OCR, and this job ran with OCR turned off."""


class UnreadableInput(SandboxError):
    """The parser recognised the bytes as not a readable document of the declared kind."""


class UnreadableText(SandboxError):
    """The document was read, but its text is not readable: mojibake, broken glyph mappings,
    or OCR junk (e.g. "94% of OCR'd letters are not in any script of the document's language
    (eng)"). Refused rather than handed to a model as if it were the document; a job with
    ``ParseLimits.admit_unreadable`` gets the text flagged instead."""


class NoExtractor(SandboxError):
    """No parser is registered in the fork server for the requested kind."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot run jobs here: a required mechanism is missing or the fork server died.

    An infrastructure failure, not a verdict on the document: a queue may retry it elsewhere.
    """

    transient = True
