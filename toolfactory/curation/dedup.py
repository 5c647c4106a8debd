"""Exact and near-duplicate dialogues across a run and across nights, by MinHash LSH (datasketch).

Three tests, strongest first (a record that is an exact copy is reported as such only):

``exact``        the same normalized first user query and the same calls (names and arguments,
                 arguments compared as parsed JSON), by a hash;
``instruction``  estimated Jaccard similarity of the word 3-shingles of all user turns at or
                 above the threshold: the same request, reworded a little or extended by a
                 follow-up;
``dialogue``     the same over the whole conversation (user and assistant text, call names and
                 arguments; system prompt and tool responses left out): the same exchange,
                 whatever the request looked like.

Words are lower-cased runs of letters and digits; a Chinese, Japanese or Korean character is a
word by itself, so shingles of text without spaces are character 3-grams. The default threshold
0.8 is measured on the 300 valid dialogues of
:func:`benchmarks.corpus.valid_dialogues`: distinct requests reach an exact
Jaccard of at most 0.68 there (two Chinese requests of one template that differ only in the
tool name), distinct dialogues at most 0.57; with 2-shingles the same template pairs reach 0.79,
and MinHash's estimate (standard error ~0.04 at 128 permutations) pushed them over 0.8. One
changed word in a 25-word request keeps ~0.9.

Signatures are plain rows (:func:`signature_row`) so that a run can store them beside its
records and a later night can index them without the records (:meth:`DialogueIndex.add_row`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, NamedTuple

from datasketch import LeanMinHash, MinHash, MinHashLSH

from toolfactory.curation.records import query
from toolfactory.models import Dialogue, canonical_json

NUM_PERM = 128
SEED = 1
SCHEME = "affine32"  # datasketch ≥ 2 needs the scheme to rebuild a signature from its values
SHINGLE = 3
SIGNATURE_VERSION = f"minhash-{SCHEME}-{NUM_PERM}-{SEED}/words-{SHINGLE}"
DEFAULT_THRESHOLD = 0.8

Kind = Literal["exact", "instruction", "dialogue"]
NearKind = Literal["instruction", "dialogue"]
NEAR_KINDS: tuple[NearKind, ...] = ("instruction", "dialogue")
_CJK = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"  # kana, CJK ideographs, hangul
_WORD = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")


class Match(NamedTuple):
    """An indexed record a new one duplicates, how (`kind`) and how closely (estimated Jaccard,
    1.0 for an exact copy)."""

    key: str
    similarity: float
    kind: Kind


def words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def shingles(tokens: list[str], size: int) -> set[str]:
    """Word `size`-grams; a text shorter than `size` words is one shingle of all of them."""
    if len(tokens) <= size:
        return {" ".join(tokens)}
    return {" ".join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _arguments(text: str) -> str:
    try:
        return canonical_json(json.loads(text))
    except json.JSONDecodeError:
        return text.strip()  # unparseable arguments still distinguish records


def instruction_text(dialogue: Dialogue) -> str:
    return "\n".join(m.content or "" for m in dialogue.messages if m.role == "user")


def dialogue_text(dialogue: Dialogue) -> str:
    parts: list[str] = []
    for message in dialogue.messages:
        if message.role in ("user", "assistant"):
            parts.append(message.content or "")
            parts += [f"{call.name} {_arguments(call.arguments)}" for call in message.tool_calls or []]
    return "\n".join(parts)


def exact_hash(dialogue: Dialogue) -> str:
    """Hash of the normalized query (words only: case, spacing and punctuation do not count) and
    the calls in order, with their arguments as canonical JSON."""
    calls = [[call.name, _arguments(call.arguments)] for m in dialogue.messages for call in m.tool_calls or []]
    return hashlib.sha256(canonical_json([" ".join(words(query(dialogue))), calls]).encode()).hexdigest()[:32]


@functools.cache
def _permutations() -> Any:
    # Drawing them is most of the cost of a new MinHash (~120 µs of ~150): drawn once, the same
    # values as every MinHash of this seed draws.
    return MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME).permutations


def minhash(features: Iterable[str]) -> LeanMinHash:
    """The MinHash signature of a set of features (shingles, words), as every index here makes it."""
    sig = MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME, permutations=_permutations())
    sig.update_batch([s.encode() for s in set(features)])
    return LeanMinHash(sig)


def _signature(text: str) -> LeanMinHash:
    return minhash(shingles(words(text), SHINGLE))


def signature_row(key: str, dialogue: Dialogue) -> dict[str, Any]:
    """What the index needs of a record, as JSON- and Parquet-friendly values (hash values are
    ints below 2**32)."""
    return {
        "key": key,
        "version": SIGNATURE_VERSION,
        "exact": exact_hash(dialogue),
        "instruction": [int(v) for v in _signature(instruction_text(dialogue)).hashvalues],
        "dialogue": [int(v) for v in _signature(dialogue_text(dialogue)).hashvalues],
    }


def _lean(values: Iterable[int]) -> LeanMinHash:
    return LeanMinHash(seed=SEED, hashvalues=list(values), scheme=SCHEME)


class DialogueIndex:
    """Indexed records (by signature only); :meth:`matches` lists those a new record duplicates."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self._exact: dict[str, list[str]] = {}
        self._lsh = {kind: MinHashLSH(threshold=threshold, num_perm=NUM_PERM) for kind in NEAR_KINDS}
        self._signatures: dict[NearKind, dict[str, LeanMinHash]] = {kind: {} for kind in NEAR_KINDS}

    def __len__(self) -> int:
        return len(self._signatures["dialogue"])

    def __contains__(self, key: object) -> bool:
        return key in self._signatures["dialogue"]

    def add(self, key: str, dialogue: Dialogue) -> None:
        self.add_row(signature_row(key, dialogue))

    def add_row(self, row: dict[str, Any]) -> None:
        """Index a row of :func:`signature_row`, e.g. one stored by an earlier night's run."""
        key = row["key"]
        if row.get("version") != SIGNATURE_VERSION:
            raise ValueError(f"signature row {key!r} has version {row.get('version')!r}, this index reads {SIGNATURE_VERSION!r}")
        if key in self:
            raise ValueError(f"{key!r} is already in the index")
        self._exact.setdefault(row["exact"], []).append(key)
        for kind in NEAR_KINDS:
            sig = _lean(row[kind])
            self._lsh[kind].insert(key, sig)
            self._signatures[kind][key] = sig

    def find(self, dialogue: Dialogue) -> list[Match]:
        """Exact copies if there are any, else every near copy of either kind, most similar first."""
        return self.find_row(signature_row("", dialogue))

    def find_row(self, row: dict[str, Any]) -> list[Match]:
        """:meth:`find` for a record's :func:`signature_row` (computed once, then also stored)."""
        exact = self._exact.get(row["exact"], [])
        if exact:
            return [Match(key, 1.0, "exact") for key in exact]
        found: list[Match] = []
        for kind in NEAR_KINDS:
            sig = _lean(row[kind])
            for key in self._lsh[kind].query(sig):
                similarity = float(sig.jaccard(self._signatures[kind][key]))
                if similarity >= self.threshold:  # LSH candidates include some below it
                    found.append(Match(key, similarity, kind))
        return sorted(found, key=lambda m: (-m.similarity, m.key, m.kind))

    def matches(self, dialogue: Dialogue) -> list[tuple[str, float]]:
        """(key, similarity) of the records `dialogue` duplicates, each key once with its highest
        similarity; :meth:`find` also says which test matched."""
        best: dict[str, float] = {}
        for match in self.find(dialogue):
            best[match.key] = max(best.get(match.key, 0.0), match.similarity)
        return sorted(best.items(), key=lambda item: (-item[1], item[0]))


@dataclass
class Deduplication:
    """The signature rows of the records kept (to store for later nights), and the duplicates by
    key with what each duplicates."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    duplicates: dict[str, list[Match]] = field(default_factory=dict)


def deduplicate(records: Iterable[tuple[str, Dialogue]], index: DialogueIndex) -> Deduplication:
    """Check records in order against `index`, adding each one that duplicates nothing. The first
    of a group is kept, so the order of `records` decides which (sort them, e.g. by id, for a
    result independent of shard order)."""
    result = Deduplication()
    for key, dialogue in records:
        row = signature_row(key, dialogue)
        found = index.find_row(row)
        if found:
            result.duplicates[key] = found
        else:
            index.add_row(row)
            result.kept.append(row)
    return result
