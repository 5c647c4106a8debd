"""Near-duplicate tools, by MinHash LSH (datasketch) over their words.

A tool's words are those of its name (camel case and snake case split), its description and its
function names, as single words and pairs; two tools whose estimated Jaccard similarity reaches
the threshold are duplicates. The same tool imported twice, a re-worded copy, and a synthesized
API that stayed too close to its example are all caught; distinct tools of one category are not.
"""

from __future__ import annotations

import re

from datasketch import MinHash, MinHashLSH

from toolfactory.models import Tool

NUM_PERM = 128
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(tool: Tool) -> set[str]:
    text = " ".join([tool.name, tool.description, *(fn.name for fn in tool.functions)])
    tokens = [w.casefold() for w in _WORD.findall(text)]
    return set(tokens) | {f"{a} {b}" for a, b in zip(tokens, tokens[1:])}


def signature(tool: Tool) -> MinHash:
    sig = MinHash(num_perm=NUM_PERM, seed=1)
    sig.update_batch([w.encode() for w in sorted(words(tool))] or [b""])
    return sig


class NearDuplicates:
    """An index of tools; :meth:`matches` lists the indexed tools similar to a new one."""

    def __init__(self, threshold: float) -> None:
        self._lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        self._threshold = threshold
        self._entries: dict[str, tuple[str, MinHash]] = {}  # key -> (label, signature)

    def add(self, key: str, label: str, sig: MinHash) -> None:
        self._lsh.insert(key, sig)
        self._entries[key] = (label, sig)

    def matches(self, sig: MinHash) -> list[tuple[str, str, float]]:
        """(key, label, estimated Jaccard) of the indexed tools at or above the threshold."""
        found = []
        for key in sorted(self._lsh.query(sig)):
            label, other = self._entries[key]
            similarity = sig.jaccard(other)
            if similarity >= self._threshold:  # LSH candidates include some below it
                found.append((key, label, similarity))
        return found
