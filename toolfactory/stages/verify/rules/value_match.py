"""Whether a value is written in a text: the comparisons of argument grounding (:mod:`.argument_grounding`).

A :class:`Source` is one text the model had read, kept in the forms the comparisons need; the
``*_found`` functions say whether a value appears in any of a list of sources:

* :func:`string_found`: the value's :func:`loose` form as whole words of a source's (anywhere for
  a value in a script written without spaces: Han, kana, Hangul, Thai, …); a numeric string as a
  number; a date as a date; a list (parts separated by ``,`` ``;`` ``|``) part by part; a value
  of several words when each word with a digit and half of the others are found.
* :func:`number_found`: among the numbers the source writes (:func:`numbers_in`: digits, English
  number words, Chinese numerals), sign ignored; a value with d decimals also matches a written
  number rounded to d decimals.
* :func:`date_found`: ``2023-03-12``, ``2023-03-12T09:30:00Z``, ``03/12/2023`` against the dates a
  source writes as ``2023.3.12``, ``12/03/2023``, ``March 12th 2023``, ``12th of March``
  (a date written without a year grounds any year), and the time of day, if the value has one
  other than midnight, against ``9:30``, ``9:30 AM``, ``9 pm``.
* a time of day (``14:00``, ``2:30 PM``) against the times a source writes.
* :func:`words_found`: a share of the content words (:func:`content_words`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

from toolfactory.stages.verify.rules.dialogue import script_of

UNSPACED_SCRIPTS = frozenset({"cjk", "thai", "lao", "khmer", "myanmar", "tibetan"})
STOP_WORDS = frozenset(
    "a an the and or nor of to in on at for with by from about as is are was were be been being it its this that these "
    "those i me my we us our you your he him his she her they them their please can could would will shall should may "
    "might must do does did have has had not no yes all any some what which who whom whose when where why how there "
    "here than then so if but also just more most very much many up out into over under".split()
)
NUMBER_WORDS: dict[str, float] = {
    **{word: float(n) for n, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split())},
    **{word: float(10 * n) for n, word in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)},
    **{word: float(n) for n, word in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth".split(), start=1)},
    "dozen": 12.0, "hundred": 100.0, "thousand": 1e3, "million": 1e6, "billion": 1e9,
}
CJK_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
CJK_UNITS = {"十": 10, "百": 100, "千": 1000}
SCALES = {"%": 0.01, "percent": 0.01, "k": 1e3, "thousand": 1e3, "million": 1e6, "billion": 1e9, "bn": 1e9}
MONTHS = {name: n for n, names in enumerate((
    "january jan", "february feb", "march mar", "april apr", "may", "june jun", "july jul", "august aug",
    "september sep sept", "october oct", "november nov", "december dec"), start=1) for name in names.split()}

_SEPARATORS = re.compile(r"[\W_]+")
_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(r"(?<![\d.,])(\d+(?:[.,]\d+)*)(?:\s*(%|percent\b|k\b|thousand\b|million\b|billion\b|bn\b))?", re.IGNORECASE)
_NUMERIC_STRING = re.compile(r"\s*[-+]?(\d+(?:[.,]\d+)*)\s*")
_PARTS = re.compile(r"[,;|\n]")
_ASCII_WORD = re.compile(r"[a-z]+")
_CJK_NUMBER = re.compile("[" + "".join(CJK_DIGITS) + "".join(CJK_UNITS) + "]+")
_TIME = r"(?:[ T](\d{1,2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\s*"
_YEAR_FIRST = re.compile(r"\s*(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})" + _TIME)
_YEAR_LAST = re.compile(r"\s*(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})" + _TIME)
_MONTH = "(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
# Dates as a loose text writes them (its separators are spaces): 2023 4 15, 15 04 2023,
# march 7th 2023, 12th of march.
_LOOSE_DATES = (
    (re.compile(r"\b(\d{4}) (\d{1,2}) (\d{1,2})\b"), "ymd"),
    (re.compile(r"\b(\d{1,2}) (\d{1,2}) (\d{4})\b"), "mdy"),
    (re.compile(r"\b" + _MONTH + " " + _DAY + r"\b(?: (\d{4})\b)?"), "Mdy"),
    (re.compile(r"\b" + _DAY + " (?:of )?" + _MONTH + r"\b(?: (\d{4})\b)?"), "dMy"),
)
_CLOCK = re.compile(r"\s*(\d{1,2}):(\d{2})(?::\d{2})?\s*(am|pm|a\.m\.|p\.m\.)?\s*", re.IGNORECASE)
_LOOSE_TIMES = re.compile(r"\b(\d{1,2})(?: (\d{2}))?(?: ?(am|pm|a m|p m))?\b")

Date = tuple[int | None, int, int]  # (year or None, month, day)


def loose(text: str) -> str:
    """`text` compared loosely: compatibility forms and accents folded, case folded, every run of
    characters that are not letters or digits one space (``"New-York_City"`` is ``"new york city"``)."""
    text = unicodedata.normalize("NFKD", text)
    if not text.isascii():
        text = "".join(char for char in text if not unicodedata.combining(char))
    return _SEPARATORS.sub(" ", text.casefold()).strip()


_loose_value = lru_cache(maxsize=1 << 16)(loose)  # argument values recur from record to record


def unspaced(text: str) -> bool:
    """Whether `text` has a letter of a script written without spaces between words."""
    return not text.isascii() and any(script_of(char) in UNSPACED_SCRIPTS for char in text)


def _stem(word: str) -> str:
    if len(word) > 4:
        if word.endswith("ies"):
            return word[:-3] + "y"
        for suffix in ("ing", "ed"):
            if word.endswith(suffix):
                return word[: -len(suffix)]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """The words of `text` that carry meaning: stop words and one-letter words left out, plural,
    -ing and -ed endings folded; in a script written without spaces, each letter."""
    words: list[str] = []
    for token in loose(text).split():
        if unspaced(token):
            words += [char for char in token if script_of(char) in UNSPACED_SCRIPTS]
        elif len(token) > 1 and token not in STOP_WORDS:
            words.append(_stem(token))
    return words


def _readings(token: str) -> set[float]:
    """The numbers a written number may mean: ``1,000`` is 1000, ``3,5`` is 3.5 too, and each part
    of ``2024.05.17`` or ``27.55.48`` on its own."""
    out: set[float] = set()
    for text in {token.replace(",", ""), token.replace(",", ".") if token.count(",") == 1 and "." not in token else ""}:
        try:
            out.add(abs(float(text)))
        except ValueError:
            pass
    parts = re.split(r"[.,]", token)
    if len(parts) > 1:
        out.update(float(part) for part in parts if part)
    return {value for value in out if math.isfinite(value)}


def numbers_in(text: str) -> set[float]:
    """Every number `text` writes, as an absolute value: digits (``1,000``; ``20%`` is also 0.2;
    ``3k``, ``3 thousand`` and ``2 million`` are also scaled), the English words of
    :data:`NUMBER_WORDS` and Chinese numerals below 10,000 (``三``, ``二十一``)."""
    found: set[float] = set()
    for match in _NUMBER.finditer(text):
        readings = _readings(match.group(1))
        found |= readings
        if match.group(2):
            factor = SCALES[match.group(2).lower()]
            found |= {value * factor for value in readings}
    found.update(NUMBER_WORDS[word] for word in _ASCII_WORD.findall(text.casefold()) if word in NUMBER_WORDS)
    if not text.isascii():
        found.update(value for run in _CJK_NUMBER.findall(text) for value in [_cjk_number(run)] if value is not None)
    return found


def _cjk_number(run: str) -> float | None:
    """A Chinese numeral below 10,000 (三 3, 十五 15, 二十一 21, 三百零五 305), or None."""
    total, digit = 0, None
    for char in run:
        if char in CJK_DIGITS:
            digit = CJK_DIGITS[char]
        else:
            total += (1 if digit is None else digit) * CJK_UNITS[char]
            digit = None
    return float(total + (digit or 0))


def dates_in(text: str) -> set[Date]:
    """The dates a loose text writes (both readings of ``03 04 2023``)."""
    found: set[Date] = set()
    if _DIGIT.search(text) is None:
        return found
    for pattern, order in _LOOSE_DATES:
        for match in pattern.finditer(text):
            a, b, c = match.groups()
            if order == "ymd":
                found.add((int(a), int(b), int(c)))
            elif order == "mdy":
                found |= {(int(c), int(a), int(b)), (int(c), int(b), int(a))}
            elif order == "Mdy":
                found.add((int(c) if c else None, MONTHS[a], int(b)))
            else:
                found.add((int(c) if c else None, MONTHS[b], int(a)))
    return found


def times_in(text: str) -> set[tuple[int, int]]:
    """(hour, minute) on a 24-hour clock of the times of day a loose text may write: 7 00 am, 14 30, 2 pm."""
    found: set[tuple[int, int]] = set()
    for match in _LOOSE_TIMES.finditer(text):
        hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
        if half and hour <= 12:
            hour = hour % 12 + (12 if half[0] == "p" else 0)
        elif match.group(2) is None:
            continue  # a bare number is no time
        found.add((hour, minute))
    return found


def as_date(value: str) -> list[tuple[int, int, int, tuple[int, int] | None]]:
    """(year, month, day, (hour, minute) or None) readings of a date value (none if it is no date)."""
    match = _YEAR_FIRST.fullmatch(value)
    readings: list[tuple[int, int, int]] = []
    if match:
        readings.append((int(match.group(1)), int(match.group(2)), int(match.group(3))))
    else:
        match = _YEAR_LAST.fullmatch(value)
        if match is None:
            return []
        a, b, year = int(match.group(1)), int(match.group(2)), int(match.group(3))
        readings += [(year, a, b), (year, b, a)]
    time = (int(match.group(4)), int(match.group(5))) if match.group(4) else None
    return [(y, m, d, time if time != (0, 0) else None) for y, m, d in readings if 1 <= m <= 12 and 1 <= d <= 31]


def as_time(value: str) -> tuple[int, int] | None:
    """(hour, minute) on a 24-hour clock of a time value (``14:00``, ``2:30 PM``), or None."""
    match = _CLOCK.fullmatch(value)
    if match is None:
        return None
    hour, minute, half = int(match.group(1)), int(match.group(2)), match.group(3)
    if half and hour <= 12:
        hour = hour % 12 + (12 if half[0].lower() == "p" else 0)
    return hour, minute


class Source:
    """One text the model had read, in the forms the comparisons need (each but the loose form
    built on first use: most values are found in it)."""

    __slots__ = ("raw", "text", "_numbers", "_words", "_dates", "_times")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.text = f" {loose(raw)} "
        """The loose form, with a space at each end (a value is looked for as ``" value "``)."""
        self._numbers: set[float] | None = None
        self._words: frozenset[str] | None = None
        self._dates: set[Date] | None = None
        self._times: set[tuple[int, int]] | None = None

    @property
    def numbers(self) -> set[float]:
        if self._numbers is None:
            self._numbers = numbers_in(self.raw)
        return self._numbers

    @property
    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = frozenset(content_words(self.text))
        return self._words

    @property
    def dates(self) -> set[Date]:
        if self._dates is None:
            self._dates = dates_in(self.text)
        return self._dates

    @property
    def times(self) -> set[tuple[int, int]]:
        if self._times is None:
            self._times = times_in(self.text)
        return self._times


def _decimals(value: float) -> int:
    if isinstance(value, int) or value.is_integer():
        return 0
    text = repr(value)
    return len(text.split(".", 1)[1]) if "." in text and "e" not in text else 0


def written(value: str | float, sources: list[Source]) -> bool:
    """Whether `value` is written as it is in a source (loosely): the quick test most values pass."""
    if isinstance(value, str):
        key = _loose_value(value)
        return bool(key) and any((key if unspaced(key) else f" {key} ") in source.text for source in sources)
    try:
        needle = f" {abs(value)} " if isinstance(value, int) else f" {loose(repr(abs(value)))} "
    except ValueError:
        return False  # an integer longer than Python writes
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        needle = f" {int(abs(value))} "
    return any(needle in source.text for source in sources)


def number_found(value: float, sources: list[Source]) -> bool:
    if written(value, sources):
        return True
    try:
        target = abs(float(value))
    except OverflowError:
        return False  # beyond a double: no written number is read as it
    decimals = _decimals(value)
    for source in sources:
        if target in source.numbers:
            return True
        for number in source.numbers:
            if math.isclose(target, number, rel_tol=1e-9) or (decimals and round(number, decimals) == target):
                return True
    return False


def date_found(value: str, sources: list[Source]) -> bool:
    for year, month, day, time in as_date(value):
        if any((year, month, day) in s.dates or (None, month, day) in s.dates for s in sources):
            if time is None or any(time in s.times for s in sources):
                return True
    return False


def words_found(value: str, sources: list[Source], share: float) -> bool:
    """At least `share` of the content words of `value`, and one at least, appear in the sources
    (a value written as it is in a source is found without counting)."""
    if written(value, sources):
        return True
    words = content_words(value)
    if not words:
        return True
    known = [source.words for source in sources]
    found = sum(1 for word in words if any(word in seen for seen in known))
    return found >= max(1.0, share * len(words))


def string_found(value: str, sources: list[Source], qualified_share: float = 0.5) -> bool:
    key = _loose_value(value)
    if not key or written(value, sources):
        return True
    numeric = _NUMERIC_STRING.fullmatch(value)
    if numeric:
        return any(number_found(reading, sources) for reading in _readings(numeric.group(1)))
    if as_date(value):
        return date_found(value, sources)
    time = as_time(value)
    if time is not None:
        return any(time in source.times for source in sources)
    parts = [part for part in _PARTS.split(value) if loose(part)]
    if len(parts) > 1 and all(string_found(part, sources, qualified_share) for part in parts):
        return True
    return _qualified_found(key, sources, qualified_share)


def _qualified_found(key: str, sources: list[Source], share: float) -> bool:
    """A value of several words (loose `key`) whose every word with a digit and `share` of the
    others are found: a name given with a qualifier ("Chicago, Illinois" for Chicago), not an
    invented one ("id-4333" for specific-1034)."""
    tokens = key.split()
    if len(tokens) < 2:
        return False
    for token in tokens:
        if any(char.isdigit() for char in token) and not any(f" {token} " in s.text for s in sources):
            if not (token.isdigit() and number_found(float(token), sources)):
                return False
    return words_found(key, sources, share)
