"""Dialogue correctness (ToolACE Table 6): the fields are there and the answers are well formed.

Bounds and thresholds are module constants (configuration can override them later).

``dialogue_mixed_language`` heuristic (severity *warning*: quoting a foreign title or answering a
translation request is legitimate). Letters are classified by script with ``unicodedata.name``
(LATIN, CYRILLIC, GREEK, ARABIC, HEBREW, Indic and South-East Asian scripts; Han, kana, Hangul,
Bopomofo and full-width forms together as one ``cjk`` group, so Japanese or Korean text that uses
Han characters is not "mixed"). A *unit* is a word: a run of letters for alphabetic scripts, and
for ``cjk`` (written without spaces) half a run of characters rounded up, a Chinese word being
about two characters long (so a four-character name in an English sentence counts as 2). Words
with an upper-case letter (names, brands, acronyms: "Lyon", "iPhone", "GPS") are left out, since
quoting a name is not switching language; cased scripts only, so Han names still count. URLs, e-mail addresses, ``code`` spans and
snake_case identifiers are ignored. The user's script is the dominant script of all user turns;
if it covers less than ``USER_SCRIPT_MIN_SHARE`` of their units the user mixes scripts
themselves and the rule does not judge. An assistant text is flagged when the units *not* in the
user's script are at least ``MIXED_MIN_FOREIGN_UNITS`` and more than ``MIXED_MAX_FOREIGN_SHARE``
of its units (an answer wholly in another script is flagged too).

``dialogue_incomplete_answer`` (final answer cut off) needs both: no terminal punctuation at the
end (``. ! ? 。 ！ ？``, a closing bracket or quote, ``*``/backtick of Markdown) and a truncation
sign: a dangling ``, ; : - – — / & + (`` (or a full-width ``， 、 ； ：``), a dangling function word (``and``, ``the``, ``of``,
``with``, ``to``, ...), or an unclosed bracket, straight double quote, curly quote or code fence
anywhere in the text. An ellipsis at the very end (``...`` or ``…``, not ``....``) is a sign on
its own. An empty final answer is ``dialogue_no_final_answer``, not this rule.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator

from toolfactory.stages.dialogues.modes import NO_CALL_MODES, matches_target
from toolfactory.stages.verify.rules.registry import Finding, Sample, rule

MAX_ANSWER_CHARS = 4000  # longest assistant text accepted (characters)
MIXED_MIN_FOREIGN_UNITS = 3
MIXED_MAX_FOREIGN_SHARE = 0.2
USER_SCRIPT_MIN_SHARE = 0.8

# C0 and C1 controls except \t \n \r, the U+FFFD replacement character, lone surrogates.
INVALID_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")

TERMINAL = frozenset(".!?。！？)]}\"'”’»」』`*")
DANGLING_PUNCTUATION = frozenset(",;:-–—/&+(，、；：")
DANGLING_WORDS = frozenset({
    "and", "or", "but", "nor", "the", "a", "an", "of", "with", "from", "to", "because", "than",
    "whose", "whereas", "including", "your", "their", "its", "is", "are", "was", "were",
})
_BRACKETS = {")": "(", "]": "[", "}": "{", "”": "“"}
_OPENERS = frozenset(_BRACKETS.values())


@rule("dialogue_no_function_call")
def no_function_call(sample: Sample) -> Iterator[Finding]:
    """A dialogue of a tool mode makes no function call. The mode is the one the dialogue was
    made for (`target_mode`) when it has one, else the one its source states."""
    dialogue = sample.dialogue
    mode = dialogue.target_mode if dialogue.target_mode is not None else dialogue.mode
    if mode not in NO_CALL_MODES and not sample.calls:
        yield "messages", f"mode {mode!r} needs a function call"


@rule("dialogue_mode_mismatch")
def mode_mismatch(sample: Sample) -> Iterator[Finding]:
    """The dialogue does not show the mode it was made for (parallel calls, a dependent call, a
    declined request, a question for a missing value, …)."""
    dialogue = sample.dialogue
    if not matches_target(dialogue):
        yield "messages", f"made for mode {dialogue.target_mode!r}, but the messages show {dialogue.mode!r}"


@rule("dialogue_no_final_answer")
def no_final_answer(sample: Sample) -> Iterator[Finding]:
    """The dialogue does not end with a non-empty assistant text turn."""
    if sample.final_answer() is None:
        yield f"messages[{len(sample.messages) - 1}]", "no final assistant answer"


@rule("dialogue_missing_field")
def missing_field(sample: Sample) -> Iterator[Finding]:
    """No tools offered, no user turn, or a message with neither content nor tool calls."""
    if not sample.dialogue.tools:
        yield "tools", "no tools are offered"
    if not any(m.role == "user" for m in sample.messages):
        yield "messages", "no user turn"
    last = len(sample.messages) - 1
    for i, message in enumerate(sample.messages):
        if message.tool_calls or (message.content and not message.content.isspace()):
            continue
        if i == last and message.role == "assistant":
            continue  # an empty closing answer is dialogue_no_final_answer
        yield f"messages[{i}]", f"{message.role} message has neither content nor tool calls"


@rule("dialogue_answer_too_long")
def answer_too_long(sample: Sample) -> Iterator[Finding]:
    """An assistant text is longer than MAX_ANSWER_CHARS characters."""
    for i, message in enumerate(sample.messages):
        if message.role == "assistant" and message.content and len(message.content) > MAX_ANSWER_CHARS:
            yield f"messages[{i}].content", f"{len(message.content)} characters (at most {MAX_ANSWER_CHARS})"


def _invalid(text: str | None) -> str | None:
    if not text:
        return None
    match = INVALID_CHARACTERS.search(text)
    if match is None:
        return None
    count = len(INVALID_CHARACTERS.findall(text))
    return f"{count} invalid character(s), the first {match.group()!r} at offset {match.start()}"


@rule("dialogue_invalid_characters")
def invalid_characters(sample: Sample) -> Iterator[Finding]:
    """Control characters (other than tab, newline, carriage return), U+FFFD, or lone surrogates."""
    for i, message in enumerate(sample.messages):
        for field, text in (("content", message.content), ("reasoning", message.reasoning)):
            problem = _invalid(text)
            if problem:
                yield f"messages[{i}].{field}", problem
        for j, call in enumerate(message.tool_calls or ()):
            problem = _invalid(call.arguments)
            if problem:
                yield f"messages[{i}].tool_calls[{j}].arguments", problem


# -- scripts ----------------------------------------------------------------------------------

_SCRIPTS = frozenset({
    "LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "GEORGIAN", "HEBREW", "ARABIC", "SYRIAC", "THAANA",
    "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL", "TELUGU", "KANNADA",
    "MALAYALAM", "SINHALA", "THAI", "LAO", "TIBETAN", "MYANMAR", "KHMER", "ETHIOPIC", "MONGOLIAN",
})
_CJK = frozenset({"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC", "FULLWIDTH", "HALFWIDTH"})
_SCRIPT_OF: dict[str, str | None] = {}
# (each alternative starts on a distinct ASCII character and scans one token: linear in practice,
# also on CJK text that has no spaces)
_IGNORED_SPANS = re.compile(r"https?://\S+|www\.\S+|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+|`[^`\n]*`|(?<![A-Za-z0-9])[A-Za-z0-9]+(?:_[A-Za-z0-9]*)+")
_IGNORED_MARKERS = ("://", "www.", "@", "`", "_")
_ASCII_WORD = re.compile(r"[A-Za-z]+")


def script_of(char: str) -> str | None:
    """'latin', 'cyrillic', ..., 'cjk' for a letter of a known script; None otherwise."""
    try:
        return _SCRIPT_OF[char]
    except KeyError:
        pass
    script: str | None = None
    if char.isalpha():
        head = unicodedata.name(char, "").split(" ", 1)[0]
        script = "cjk" if head in _CJK else head.lower() if head in _SCRIPTS else None
    _SCRIPT_OF[char] = script
    return script


def script_units(text: str) -> dict[str, int]:
    """Units (words) per script of `text`, names left out (see the module doc)."""
    if any(marker in text for marker in _IGNORED_MARKERS):
        text = _IGNORED_SPANS.sub(" ", text)
    if text.isascii():
        count = sum(1 for word in _ASCII_WORD.findall(text) if word.islower())
        return {"latin": count} if count else {}
    units: dict[str, int] = {}
    run_script: str | None = None
    run_length = 0
    run_upper = False
    for char in text + " ":
        script = script_of(char)
        if script is not None and script == run_script:
            run_length += 1
            run_upper = run_upper or char.isupper()
            continue
        if script is None and run_script is not None and unicodedata.category(char).startswith("M"):
            continue  # combining marks continue a word
        if run_script == "cjk":
            units["cjk"] = units.get("cjk", 0) + (run_length + 1) // 2
        elif run_script is not None and not run_upper:
            units[run_script] = units.get(run_script, 0) + 1
        run_script, run_length, run_upper = script, 1, char.isupper()
    return units


def _user_script(sample: Sample) -> str | None:
    text = " ".join(m.content for m in sample.messages if m.role == "user" and m.content)
    if text.isascii():
        return "latin" if _ASCII_WORD.search(text) else None
    units = script_units(text)
    total = sum(units.values())
    if not total:
        return None
    script, count = max(units.items(), key=lambda item: item[1])
    return script if count >= USER_SCRIPT_MIN_SHARE * total else None


@rule("dialogue_mixed_language", severity="warning")
def mixed_language(sample: Sample) -> Iterator[Finding]:
    """An assistant text mixes in (or is in) a script other than the one the user wrote in."""
    user_script = None
    for i, message in enumerate(sample.messages):
        text = message.content
        if message.role != "assistant" or not text:
            continue
        if user_script is None:
            user_script = _user_script(sample) or ""
        if not user_script or (user_script == "latin" and text.isascii()):
            continue
        units = script_units(text)
        total = sum(units.values())
        foreign = total - units.get(user_script, 0)
        if foreign >= MIXED_MIN_FOREIGN_UNITS and foreign > MIXED_MAX_FOREIGN_SHARE * total:
            others = ", ".join(f"{s} {n}" for s, n in sorted(units.items(), key=lambda item: -item[1]) if s != user_script)
            yield f"messages[{i}].content", f"the user writes {user_script}; {foreign} of {total} units are in other scripts ({others})"


# -- truncation -------------------------------------------------------------------------------

def _unbalanced(text: str) -> str | None:
    stack: list[str] = []
    for char in text:
        if char in _OPENERS:
            stack.append(char)
        elif char in _BRACKETS and stack and stack[-1] == _BRACKETS[char]:
            stack.pop()  # a closer without its opener ("1) ...") is ignored
    if stack:
        return f"unclosed {stack[-1]!r}"
    if text.count('"') % 2:
        return "unclosed double quote"
    if text.count("```") % 2:
        return "unclosed code fence"
    return None


def truncation(text: str) -> str | None:
    """Why `text` looks cut off, or None (see the module doc)."""
    text = text.rstrip()
    if not text:
        return None
    if text.endswith("…") or (text.endswith("...") and not text.endswith("....")):
        return "ends with an ellipsis"
    last = text[-1]
    if last in TERMINAL:
        return None
    if last in DANGLING_PUNCTUATION:
        return f"ends with a dangling {last!r}"
    match = re.search(r"([A-Za-z]+)$", text)
    if match and match.group(1).lower() in DANGLING_WORDS:
        return f"ends with the dangling word {match.group(1)!r}"
    problem = _unbalanced(text)
    return f"no terminal punctuation and {problem}" if problem else None


@rule("dialogue_incomplete_answer")
def incomplete_answer(sample: Sample) -> Iterator[Finding]:
    """The final answer is cut off (no terminal punctuation and a truncation sign)."""
    final = sample.final_answer()
    if final is None:
        return
    index, text = final
    problem = truncation(text)
    if problem:
        yield f"messages[{index}].content", f"the final answer looks truncated: {problem}"
