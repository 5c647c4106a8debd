"""Which record of a group of duplicates is kept: the one indexed first.

The rule of :func:`.dedup.deduplicate`, applied to the pairs :class:`.duplicate_pairs.SignatureTable`
finds instead of to an index in memory: records of earlier nights are indexed before the run; the
run's records are checked in key order (a record's key is ``<run_id>/<dialogue id>``, so this is
the order of the dialogue ids, whatever order the shards finished in), and a record that duplicates nothing indexed is indexed in turn. So of two
duplicates in the run the one of smaller id is kept, and a record that duplicates only a rejected
record is kept. Matches are reported as :class:`.dedup.DialogueIndex.find_row` reports them: exact
copies alone if there are any (in the order they were indexed), else every near copy, most
similar first.
"""

from __future__ import annotations

from typing import Collection, Iterable

from toolfactory.curation.dedup import Match
from toolfactory.curation.duplicate_pairs import Pair


def first_kept(pairs: Iterable[Pair], kinds: Collection[str]) -> dict[str, list[Match]]:
    """{run key: the matches of the enabled `kinds`} of every run record to reject.

    A record whose matches are all of kinds not enabled is kept but, as in the index, not indexed."""
    by_key: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_key.setdefault(pair.key, []).append(pair)
    rejected: dict[str, list[Match]] = {}
    not_indexed: set[str] = set()  # run records checked and found to duplicate one indexed
    for key in sorted(by_key):
        live = [p for p in by_key[key] if not (p.other_in_run and p.other in not_indexed)]
        exact = sorted((p for p in live if p.kind == "exact"), key=lambda p: (p.other_in_run, p.other_rank or 0, p.other))
        if exact:
            found = [Match(p.other, 1.0, "exact") for p in exact]
        else:
            found = sorted((Match(p.other, p.similarity, p.kind) for p in live), key=lambda m: (-m.similarity, m.key, m.kind))
        if found:
            not_indexed.add(key)
        chosen = [m for m in found if m.kind in kinds]
        if chosen:
            rejected[key] = chosen
    return rejected
