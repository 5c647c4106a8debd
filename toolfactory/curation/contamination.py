"""Decontamination: records whose user requests overlap the test items of an evaluation set.

A model scored on BFCL, ToolBench or ToolAlpaca must not have trained on their test items. Every
user turn of a record (and, for several turns, all of them together) is compared with every turn
of every item (and an item's turns together) of the sets in :mod:`.evaluation_sets`, with the
words of :func:`.dedup.words` (lower-cased runs of letters and digits: case, punctuation and
spacing do not count). Tests, strongest first; the first that matches names the finding:

``exact``      the same words in the same order: a copy, whatever its casing;
``reordered``  the same words in another order (the sorted words are equal): a paraphrase by word
               order, however short the item;
``ngram``      a shared run of ``ngram`` words (13, as GPT-3's decontamination), or
               the whole item where it is shorter but has at least ``min_words`` words: a copy
               inside a longer request;
``ordered``    MinHash LSH over word 3-shingles (the signature of :mod:`.dedup`), estimated
               Jaccard at or above ``ordered``: a near copy with a few words changed;
``bag``        MinHash LSH over the set of words, at or above ``bag``: reordered and lightly
               edited (word order does not enter the signature);
``tools``      the same word bag at or above ``tools`` (lower) when the record also offers every
               function the item names: the request with its tool set.

Items shorter than ``min_words`` words match only by ``exact`` and ``reordered``: a short
question such as "How old am I?" is contamination when it is the whole turn, not when a longer
request contains it. The thresholds are measured in ``benchmarks/decontamination.py``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from datasketch import LeanMinHash, MinHashLSH

from toolfactory.config.curate import DecontaminateConfig
from toolfactory.curation.dedup import NUM_PERM, SHINGLE, minhash, shingles, words
from toolfactory.curation.evaluation_sets import (
    EvaluationSet,
    Item,
    builtin_set,
    missing_set,
    record_function_names,
    user_set,
)
from toolfactory.models import Dialogue

log = logging.getLogger(__name__)

TESTS = ("exact", "reordered", "ngram", "ordered", "bag", "tools")
_RANK = {test: rank for rank, test in enumerate(TESTS)}
# One LSH, over the word sets, finds the candidates of the three MinHash tests: a turn near an item
# in order is near it as a bag of words too (three changed words of twenty leave 0.54 of the
# 3-shingles, 0.74 of the words). 20 bands of 3 rows make a pair of word-set similarity 0.5 a
# candidate with probability 0.93 (0.6: 0.99, 0.3: 0.42); candidates are then confirmed by their
# estimated similarity. Only the word-set signature of an item is made when the index is built
# (it is most of the cost); its 3-shingle signature is made when it is a candidate.
_BANDS = (20, 3)

# Profile dimensions. What was checked is one fact per run, counted by the one select shard: items
# per set, sets skipped (``"<set>: <why>"``), and the settings (similarities in percent). The
# curate shards count the records rejected per set and test (``"<set>: <test>"``).
CHECKED = "contamination_sets"
SKIPPED = "contamination_skipped"
SETTINGS = "contamination_settings"
CONTAMINATED = "contaminated"


@dataclass(frozen=True)
class Thresholds:
    ngram: int = 13
    min_words: int = 8
    ordered: float = 0.5
    bag: float = 0.8
    tools: float = 0.6

    @classmethod
    def of(cls, settings: DecontaminateConfig) -> Thresholds:
        return cls(settings.ngram, settings.min_words, settings.ordered_threshold, settings.bag_threshold,
                   settings.tools_threshold)


class Finding(NamedTuple):
    """A record overlaps `item` of `benchmark`: which test found it, how closely (1.0 for the
    exact tests)."""

    benchmark: str
    item: str
    test: str
    score: float

    @property
    def label(self) -> str:
        return f"{self.benchmark}: {self.test}"


def _units(turns: Sequence[str]) -> list[list[str]]:
    """The word lists compared: each turn, and all turns together when there are several."""
    tokens = [words(turn) for turn in turns]
    units = [t for t in tokens if t]
    if len(units) > 1:
        units.append([w for t in units for w in t])
    return units


def _key(tokens: Sequence[str]) -> int:
    return hash(tuple(tokens))  # within one process, as the index lives


def _grams(tokens: Sequence[str], size: int) -> list[int]:
    return [hash(tuple(tokens[i : i + size])) for i in range(len(tokens) - size + 1)]


class _Texts(NamedTuple):
    """One set's text hashes -> the first unit that has it."""

    exact: dict[int, int]
    sorted: dict[int, int]
    grams: dict[int, int]  # n-grams of long items, whole short items (by length)


class ContaminationIndex:
    """The items of the sets checked, indexed for the tests; :meth:`find` lists the sets a record
    overlaps."""

    def __init__(self, sets: Sequence[EvaluationSet], thresholds: Thresholds = Thresholds()) -> None:
        if thresholds.min_words > thresholds.ngram:
            raise ValueError(f"min_words ({thresholds.min_words}) must not exceed ngram ({thresholds.ngram})")
        self.sets = tuple(sets)
        self.thresholds = thresholds
        self._items: list[tuple[str, Item]] = []  # unit key -> (set, item)
        self._texts: dict[str, _Texts] = {s.name: _Texts({}, {}, {}) for s in self.sets}  # per set: sets may share texts
        self._lengths: set[int] = set()  # word counts of the short items indexed whole
        self._lsh = MinHashLSH(num_perm=NUM_PERM, params=_BANDS)
        self._bags: dict[int, LeanMinHash] = {}
        self._tokens: dict[int, list[str]] = {}  # of the items in the LSH, for their 3-shingle signature
        self._shingled: dict[int, LeanMinHash] = {}
        seen: set[tuple[str, int]] = set()  # (set, words): a text repeated in a set is indexed once
        for evaluation in self.sets:
            for item in evaluation.items:
                for tokens in _units(item.turns):
                    if (evaluation.name, _key(tokens)) not in seen:
                        seen.add((evaluation.name, _key(tokens)))
                        self._add(evaluation.name, item, tokens)

    def _add(self, name: str, item: Item, tokens: list[str]) -> None:
        key = len(self._items)
        self._items.append((name, item))
        texts = self._texts[name]
        texts.exact.setdefault(_key(tokens), key)
        texts.sorted.setdefault(_key(sorted(tokens)), key)
        size = self.thresholds.ngram
        if len(tokens) >= size:
            for gram in _grams(tokens, size):
                texts.grams.setdefault(gram, key)
        elif len(tokens) >= self.thresholds.min_words:
            texts.grams.setdefault(_key(tokens), key)
            self._lengths.add(len(tokens))
        if len(tokens) >= self.thresholds.min_words:
            self._bags[key] = minhash(tokens)
            self._tokens[key] = tokens
            self._lsh.insert(key, self._bags[key], check_duplication=False)

    def _ordered(self, key: int) -> LeanMinHash:
        if key not in self._shingled:
            self._shingled[key] = minhash(shingles(self._tokens[key], SHINGLE))
        return self._shingled[key]

    def __len__(self) -> int:
        """Items indexed (turns and multi-turn wholes, each distinct text once per set)."""
        return len(self._items)

    def items(self) -> dict[str, int]:
        """Items per set checked (a skipped set has none)."""
        return {s.name: len(s.items) for s in self.sets if s.skipped is None}

    def skipped(self) -> dict[str, str]:
        return {s.name: s.skipped for s in self.sets if s.skipped is not None}

    def find(self, dialogue: Dialogue) -> list[Finding]:
        """The sets `dialogue`'s user turns overlap, one finding each (its strongest test),
        sorted by set."""
        turns = [m.content for m in dialogue.messages if m.role == "user" and isinstance(m.content, str)]
        return self.find_turns(turns, record_function_names(fn.name for fn in dialogue.tools))

    def find_turns(self, turns: Sequence[str], functions: frozenset[str] = frozenset()) -> list[Finding]:
        best: dict[str, Finding] = {}

        def found(key: int, test: str, score: float) -> None:
            name, item = self._items[key]
            finding = Finding(name, item.id, test, round(score, 4))
            held = best.get(name)
            if held is None or (_RANK[test], -score) < (_RANK[held.test], -held.score):
                best[name] = finding

        t = self.thresholds
        for tokens in _units(turns):
            exact, reordered = _key(tokens), _key(sorted(tokens))
            grams = [gram for size in (t.ngram, *self._lengths) for gram in _grams(tokens, size)]
            for texts in self._texts.values():
                if (key := texts.exact.get(exact)) is not None:
                    found(key, "exact", 1.0)
                if (key := texts.sorted.get(reordered)) is not None:
                    found(key, "reordered", 1.0)
                if (key := next((k for gram in grams if (k := texts.grams.get(gram)) is not None), None)) is not None:
                    found(key, "ngram", 1.0)
            if len(tokens) < t.min_words:
                continue  # its word set is too small for an estimate of similarity
            bag, ordered = minhash(tokens), minhash(shingles(tokens, SHINGLE))
            for key in self._lsh.query(bag):
                similarity = float(bag.jaccard(self._bags[key]))
                in_order = float(ordered.jaccard(self._ordered(key))) if similarity >= t.ordered else 0.0
                functions_held = bool(self._items[key][1].functions) and set(self._items[key][1].functions) <= functions
                if in_order >= t.ordered:
                    found(key, "ordered", in_order)
                if similarity >= t.bag:
                    found(key, "bag", similarity)
                elif similarity >= t.tools and functions_held:
                    found(key, "tools", similarity)
        return [best[name] for name in sorted(best)]


def checked(sets: Iterable[EvaluationSet], thresholds: Thresholds) -> dict[str, dict[str, int]]:
    """The profile counts of what a run checks (see :data:`CHECKED`)."""
    sets = list(sets)
    return {
        CHECKED: {s.name: len(s.items) for s in sets if s.skipped is None},
        SKIPPED: {f"{s.name}: {s.skipped}": 1 for s in sets if s.skipped is not None},
        SETTINGS: {"ngram words": thresholds.ngram, "min words": thresholds.min_words,
                   "ordered similarity %": round(thresholds.ordered * 100), "bag similarity %": round(thresholds.bag * 100),
                   "tools similarity %": round(thresholds.tools * 100)},
    }


def settings_text(settings: dict[str, int]) -> str:
    """The :data:`SETTINGS` counts in words, for the report and the dataset card."""
    if not settings:
        return "not recorded"
    return (f"a shared run of {settings.get('ngram words')} words (a whole item of {settings.get('min words')} words "
            f"or more); MinHash similarity of word 3-shingles in order at least {settings.get('ordered similarity %', 0) / 100:.2f}, "
            f"of word sets at least {settings.get('bag similarity %', 0) / 100:.2f}, or "
            f"{settings.get('tools similarity %', 0) / 100:.2f} when the dialogue offers the item's functions")


def reasons(findings: Iterable[Finding]) -> list[str]:
    """The rejection codes of a record's findings: ``contaminated_<set>``."""
    return sorted({f"contaminated_{f.benchmark}" for f in findings})


def detail(findings: Iterable[Finding]) -> str:
    return "overlaps " + "; ".join(f"{f.benchmark} item {f.item} ({f.test}, {f.score:.2f})" for f in findings)


# --- the sets of a run's settings, read once per process ------------------------------------


def _file_state(path: str) -> tuple[str, int, int]:
    try:
        stat = Path(path).expanduser().stat()
    except OSError:
        return (path, -1, -1)
    return (path, stat.st_mtime_ns, stat.st_size)


def evaluation_sets(settings: DecontaminateConfig) -> tuple[EvaluationSet, ...]:
    """The sets `settings` names, built-in first (a changed user file is read again)."""
    states = tuple(_file_state(f.path) for f in settings.files)
    return _sets(tuple(settings.benchmarks), tuple((f.name, f.path, f.field) for f in settings.files), states)


@functools.lru_cache(maxsize=4)
def _sets(builtin: tuple[str, ...], files: tuple[tuple[str, str, str | None], ...],
          states: tuple[tuple[str, int, int], ...]) -> tuple[EvaluationSet, ...]:
    found = [builtin_set(name) for name in builtin]
    found += [user_set(name, path, field, f"curate.decontaminate.files.{i}") for i, (name, path, field) in enumerate(files)]
    for evaluation in found:
        if evaluation.skipped:
            log.warning("decontamination: %s is not checked: %s", evaluation.name, evaluation.skipped)
    return tuple(found)


def check_sets(settings: DecontaminateConfig) -> list[str]:
    """Check the sets of `settings` before a run starts: :class:`ConfigError` naming the field of a
    file that cannot be read or holds no question (the user's files are read); a line for each
    built-in set that will be skipped (found missing without reading it)."""
    if not settings.enabled:
        return []
    for index, f in enumerate(settings.files):
        user_set(f.name, f.path, f.field, f"curate.decontaminate.files.{index}")
    return [f"decontamination: {name} is not checked: {why}" for name in settings.benchmarks if (why := missing_set(name))]


def contamination_index(settings: DecontaminateConfig) -> ContaminationIndex:
    """The index of `settings`' sets, built once per process and settings."""
    return _index(evaluation_sets(settings), Thresholds.of(settings))


@functools.lru_cache(maxsize=2)
def _index(sets: tuple[EvaluationSet, ...], thresholds: Thresholds) -> ContaminationIndex:
    return ContaminationIndex(sets, thresholds)
