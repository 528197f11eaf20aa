"""Keeps an untrusted body from forging the structure of the text it is rendered into.

A body line that reads as a block heading or a role line gets one more ``>`` in front
(mboxrd-style, reversible), so an attachment cannot open a second block or speak as SYSTEM.
"Reads as" is judged the way a reader sees the line, not by its code points: homoglyphs of
any script, small capitals, compatibility forms, combining marks, invisible characters and
fillers, and any list, Markdown or emoji prefix are all seen through. The judge is one regular
expression over the raw line, built from bridge/knowledge/fold_tables.py (generated from
Unicode's confusables via ICU), so it costs one match per line and no normalisation.
Folding, reverse and what is escaped: docs/spec-decisions.md, "body lines that read as markers".
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata

from bridge.knowledge.fold_tables import (
    ASCII_FOLDS,
    IGNORABLE,
    LETTER_FOLDS,
    LETTERS,
    SYMBOL_FOLDS,
)

#: What is put before a body line that reads as a marker: a quote mark, as in mail.
MARKER_ESCAPE = ">"

#: Words that open a block in the selections the bridges render (``ATTACHMENT [x]``,
#: ``DOCUMENT [x] (id: y)``, ``SOURCE [x]: y``); followed by ``[`` they read as a heading.
BLOCK_HEADINGS = ("attachment", "document", "source")

#: Speaker names of the chat formats models are trained on (OpenAI, Anthropic, Gemini, Llama);
#: followed by ``:``, ``]`` or ``>`` they read as a turn, not as a quote from a file.
ROLE_NAMES = (
    "system",
    "developer",
    "user",
    "assistant",
    "human",
    "ai",
    "model",
    "tool",
    "function",
    "ipython",
)

#: The words of chat-template tokens that are not ``<|...|>`` (which is judged whole):
#: Llama 2 and Mistral's ``[INST]``, ``<<SYS>>`` and ``[SYSTEM_PROMPT]``, Gemma's turn tags.
TEMPLATE_WORDS = ("inst", "sys", "system_prompt", "start_of_turn", "end_of_turn")

# Longest run between "<|" and "|>" still read as one template token (the longest in use,
# "<|reserved_special_token_250|>", has 27); bounded so the search stays linear.
_TOKEN_CHARS = 64
# List enumerators made of letters ("a)", "iv.", "(b)"): a reader skips them like "1." or "-".
_ENUMERATOR_LETTERS = 4

# Inside a word a digit may stand for a letter ("T00L" reads as "TOOL"), so both tables count.
_FOLDS = {
    key: LETTER_FOLDS.get(key, "") + SYMBOL_FOLDS.get(key, "")
    for key in LETTER_FOLDS.keys() | SYMBOL_FOLDS.keys()
}
_LONGEST_FOLD = max(len(key) for key in _FOLDS)

_ESCAPED_RANGE = re.compile(r"(\\u[0-9a-f]{4}|\\U[0-9a-f]{8})(?:-(\\u[0-9a-f]{4}|\\U[0-9a-f]{8}))?")
_ASTRAL = "\\U00010000-\\U0010ffff"


def _escape(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _planes(body: str) -> tuple[str, str]:
    """``body`` (a class of escapes, as fold_tables writes them) cut into its part in the basic
    plane and its part beyond.

    The regular-expression engine tests a basic-plane class with one bitmap look-up, but the
    ranges beyond it one by one: kept apart, a line of ordinary text never pays for them.
    """
    basic, astral = [], []
    for match in _ESCAPED_RANGE.finditer(body):
        low = int(match.group(1)[2:], 16)
        high = int(match.group(2)[2:], 16) if match.group(2) else low
        if low <= 0xFFFF:
            basic.append(f"{_escape(low)}-{_escape(min(high, 0xFFFF))}")
        if high > 0xFFFF:
            astral.append(f"{_escape(max(low, 0x10000))}-{_escape(high)}")
    return "".join(basic), "".join(astral)


def _within(body: str) -> str:
    """A pattern for one character of the class ``body``."""
    basic, astral = _planes(body)
    choices = [f"[{basic}]"] if basic else []
    if astral:
        choices.append(f"(?=[{_ASTRAL}])[{astral}]")
    return f"(?:{'|'.join(choices)})" if choices else "(?!)"


def _outside(body: str, also: str = "") -> str:
    """A pattern for one character neither in the basic-plane part of the class ``body`` nor in
    ``also``. Every character beyond the basic plane counts as outside: a line that begins with
    a historic script's letter and then a role word is escaped, a false positive that costs
    one ``>`` where testing those ranges would cost every emoji of every line."""
    basic, _ = _planes(body)
    return f"[^{basic}{also}]"


# What shows nothing is taken out before the match, in one pass: read through inside the
# pattern, it would sit between every two letters of every spelling.
_IGNORABLE = re.compile(f"{_within(IGNORABLE)}+")
_LETTER = _within(LETTERS)
_NOT_LETTER = _outside(LETTERS)
# After the word and before its punctuation: spaces, invisible characters, Markdown emphasis,
# quotes, pipes. Never a letter or a digit: "User 2:", "Systems:" and "User manual" are prose.
_GAP = _outside(LETTERS, also=r"\d") + "*"
# Between two letters of a word: one space at most ("S Y S T E M").
_BETWEEN = "\\s?"


def _punctuation_class(char: str) -> str:
    """The class body of what reads as ``char``. Its look-alike letters count only when the
    fold is not a letter itself: "|" folds to "l", and "<label>" is no "<|...|>" token."""
    folded = ASCII_FOLDS[char]
    letters = "" if any(part.isalnum() for part in folded) else LETTER_FOLDS.get(folded, "")
    return SYMBOL_FOLDS.get(folded, "") + letters


def _punctuation(char: str) -> str:
    return _within(_punctuation_class(char))


def _run(folded: str) -> str:
    """A pattern for a run of characters whose folds, joined, are ``folded``: "rn" is "m"
    (whose skeleton it is) or "r" then "n"."""
    choices = [
        _within(body) + ("" if end == len(folded) else _run(folded[end:]))
        for end in range(1, len(folded) + 1)
        if (body := _FOLDS.get(folded[:end]))
    ]
    return f"(?:{'|'.join(choices)})" if choices else "(?!)"


def _word(word: str) -> str:
    """A pattern for ``word`` in any case and any look-alike spelling.

    Each letter folds as its capital or as its small form ("M" to "m", "m" to "rn"), and a
    line may mix them; one character may also show several letters ("ﬆ" is "st").
    """
    letters = [sorted({ASCII_FOLDS[char.upper()], ASCII_FOLDS[char.lower()]}) for char in word]

    @functools.cache
    def rest(start: int) -> str:
        if start == len(word):
            return ""
        one = "|".join(_run(option) for option in letters[start])
        choices = [f"(?:{one}){_after(start + 1)}{rest(start + 1)}"]
        for end in range(start + 2, min(len(word), start + _LONGEST_FOLD) + 1):
            for spelling in sorted(
                {"".join(parts) for parts in itertools.product(*letters[start:end])}
            ):
                if body := _FOLDS.get(spelling):
                    choices.append(f"{_within(body)}{_after(end)}{rest(end)}")
        return f"(?:{'|'.join(choices)})"

    def _after(end: int) -> str:
        return "" if end == len(word) else _BETWEEN

    return rest(0)


def _any(words: tuple[str, ...]) -> str:
    return "(?:" + "|".join(_word(word) for word in words) + ")"


def _marker_pattern() -> str:
    open_, slash = _punctuation("<"), _punctuation("/")
    pipe, close = _punctuation("|"), _punctuation(">")
    enumerator = f"{_LETTER}{{1,{_ENUMERATOR_LETTERS}}}(?:{_punctuation('.')}|{_punctuation(')')})"
    # Whatever a reader skips before the first word: spaces, quote marks, list bullets and
    # numbers, Markdown, emoji, invisible characters and letter enumerators.
    prefix = f"(?:{_NOT_LETTER}|{enumerator})*"
    heading = f"{_any(BLOCK_HEADINGS)}{_GAP}(?:{_punctuation('[')}|{_within(_opening_brackets())})"
    role = (
        f"{_any(ROLE_NAMES + TEMPLATE_WORDS)}{_GAP}"
        f"(?:{_punctuation(':')}|{_punctuation(']')}|{close})"
    )
    # ChatML and its descendants: "<|im_start|>", "<|system|>", "<|eot_id|>".
    token = f"{open_}{pipe}.{{0,{_TOKEN_CHARS}}}?{pipe}{close}"
    # Llama 2's "<s>" and "</s>" around a turn.
    bos = f"{open_}(?:{slash})?{_word('s')}{close}"
    # One class test before the alternatives, at each place the prefix may end: a line of
    # spaces or emoji then costs a look-up per character, not one per word.
    initials = {
        ASCII_FOLDS[case][0]
        for word in (*BLOCK_HEADINGS, *ROLE_NAMES, *TEMPLATE_WORDS)
        for case in (word[0].upper(), word[0].lower())
    }
    guard = _punctuation_class("<") + "".join(
        body for key, body in _FOLDS.items() if key[0] in initials
    )
    return f"{prefix}(?={_within(guard)})(?:{heading}|{role}|{token}|{bos})"


def _opening_brackets() -> str:
    """Every opening bracket (Unicode's Ps), and the angle quotes a label may be set in, as a
    class body: "ATTACHMENT 【payroll.xlsx】" or "⟦…⟧" opened a block a reader took for
    airlock's, though none of those brackets folds to "["."""
    openers = [code for code in range(0x10000) if unicodedata.category(chr(code)) == "Ps"]
    return "".join(_escape(code) for code in (*openers, ord("<"), 0x2039, 0x00AB))


@functools.cache
def _marker() -> re.Pattern[str]:
    # Built at first use, not at import: 80 ms that every importer of the bridge (the CLI's
    # --version among them) paid before it did anything.
    return re.compile(_marker_pattern())


def reads_as_marker(line: str) -> bool:
    """True when ``line`` could be taken for a block heading or a role line, escaped or not
    (leading ``>`` are among what a reader skips, so the escape does not change the answer)."""
    if not line.isascii():  # an ASCII line is its own decomposition (isascii costs nothing)
        line = unicodedata.normalize("NFKD", line)
    return _marker().match(_IGNORABLE.sub("", line)) is not None


def escape_markers(body: str) -> str:
    """``body`` with :data:`MARKER_ESCAPE` before every line that reads as a marker.

    Lines are split wherever :meth:`str.splitlines` splits (a reader or a model may break a
    line at U+2028 as readily as at ``\\n``), and the separators are kept as they were.
    """
    return "".join(
        MARKER_ESCAPE + line if reads_as_marker(line) else line
        for line in body.splitlines(keepends=True)
    )
