"""Duplicate pairs of a whole run without holding its signatures in memory: LSH bands in DuckDB.

:class:`.dedup.DialogueIndex` keeps every signature in a datasketch ``MinHashLSH`` in memory,
which grows with the run and with every earlier night. Here the signatures go to a DuckDB
database on disk under a memory limit, and the same LSH runs as SQL: a signature is cut into the
``b`` bands of ``r`` hash values that datasketch's ``MinHashLSH`` chooses for the threshold, two
signatures sharing any band are candidates (a join on the band's values, which DuckDB spills to
disk when it must), and a candidate is a match when its estimated Jaccard similarity (the share of
equal hash values, datasketch's own estimate) reaches the threshold. Exact copies are a join on the
exact hash. Only pairs whose left side is a record of the run and whose right side is indexed
earlier (an earlier night's record, or a run record of smaller key) are
produced: :func:`.duplicate_rule.first_kept` decides from them which records are kept.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa

from toolfactory.curation.dedup import NEAR_KINDS, NUM_PERM, SIGNATURE_VERSION, Kind

# DuckDB spills tables and joins to its temporary folder beyond its memory limit, but a join still
# needs some blocks per thread: when it runs out of memory all the same, the next limit is tried.
MEMORY_LIMITS = ("64MB", "256MB", "1GB", "4GB")
MEMORY_LIMIT = MEMORY_LIMITS[0]
_BATCH = 5_000

_SCHEMA = pa.schema([
    ("key", pa.string()),
    ("run", pa.bool_()),  # a record of this run (else indexed before it)
    ("rank", pa.int64()),  # order of the indexed records; NULL for the run's
    ("exact", pa.string()),
    ("instruction", pa.list_(pa.uint32())),
    ("dialogue", pa.list_(pa.uint32())),
])


@dataclass(frozen=True)
class Pair:
    """A run record (`key`) and an earlier record it duplicates if that one is indexed."""

    key: str
    other: str
    other_in_run: bool
    other_rank: int | None
    kind: Kind
    similarity: float


def lsh_bands(threshold: float) -> tuple[int, int]:
    """(bands, rows per band) that datasketch's MinHashLSH uses for `threshold`."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
    return int(lsh.b), int(lsh.r)


class SignatureTable:
    """The signatures of the indexed records and of the run's, in a DuckDB file of its own or in
    the caller's database."""

    def __init__(self, threshold: float, *, memory_limit: str = MEMORY_LIMIT, folder: str | None = None,
                 db: Any = None) -> None:
        """A DuckDB file of its own in a temporary folder, or its tables in `db`, an open
        connection the caller owns (and whose memory limit then applies)."""
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        if db is None:
            import duckdb

            self._folder = tempfile.TemporaryDirectory(prefix="toolfactory-dedup-", dir=folder)
            db = duckdb.connect(str(Path(self._folder.name) / "signatures.duckdb"))
            db.execute(f"SET memory_limit = '{memory_limit}'")
        self._db = db
        self._db.execute("SET preserve_insertion_order = false")
        self._db.execute("CREATE TABLE signatures (key VARCHAR, run BOOLEAN, rank BIGINT, exact VARCHAR, "
                         "instruction UINTEGER[], dialogue UINTEGER[])")
        self._indexed = 0

    def close(self) -> None:
        if self._folder is None:  # the caller's connection: only the tables go
            self._db.execute("DROP TABLE IF EXISTS candidates")
            self._db.execute("DROP TABLE signatures")
            return
        self._db.close()
        self._folder.cleanup()

    def __enter__(self) -> SignatureTable:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def index(self, rows: Iterable[dict[str, Any]]) -> None:
        """Add signature rows (:func:`.dedup.signature_row`) that every run record is checked against."""
        self._insert(rows, run=False)

    def add_run(self, rows: Iterable[dict[str, Any]]) -> None:
        """Add the run's signature rows, checked against the indexed ones and each other."""
        self._insert(rows, run=True)

    def _insert(self, rows: Iterable[dict[str, Any]], *, run: bool) -> None:
        batch: list[dict[str, Any]] = []
        for row in rows:
            if row.get("version") != SIGNATURE_VERSION:
                raise ValueError(f"signature row {row['key']!r} has version {row.get('version')!r}, "
                                 f"this index reads {SIGNATURE_VERSION!r}")
            batch.append(row)
            if len(batch) == _BATCH:
                self._insert_batch(batch, run)
                batch = []
        if batch:
            self._insert_batch(batch, run)

    def _insert_batch(self, rows: list[dict[str, Any]], run: bool) -> None:
        ranks = [None] * len(rows) if run else list(range(self._indexed, self._indexed + len(rows)))
        if not run:
            self._indexed += len(rows)
        table = pa.table({
            "key": [r["key"] for r in rows], "run": [run] * len(rows), "rank": ranks, "exact": [r["exact"] for r in rows],
            "instruction": [r["instruction"] for r in rows], "dialogue": [r["dialogue"] for r in rows],
        }, schema=_SCHEMA)
        self._db.register("batch", table)
        self._db.execute("INSERT INTO signatures SELECT * FROM batch")
        self._db.unregister("batch")

    def pairs(self) -> Iterator[Pair]:
        """Every exact pair, and every near pair of either kind, of a run record with an earlier one."""
        exact = self._db.execute(
            "SELECT a.key, b.key, b.run, b.rank FROM signatures a JOIN signatures b ON a.exact = b.exact "
            "WHERE a.run AND (NOT b.run OR b.key < a.key)")
        while chunk := exact.fetchmany(_BATCH):
            for key, other, other_run, rank in chunk:
                yield Pair(key, other, other_run, rank, "exact", 1.0)
        bands, rows = lsh_bands(self.threshold)
        for kind in NEAR_KINDS:
            yield from self._near(kind, bands, rows)

    def _near(self, kind: str, bands: int, rows: int) -> Iterator[Pair]:
        # Candidates first (keys only), then the signatures of each candidate pair in batches. A
        # band is joined on a 64-bit hash of its values, not the list itself: equal bands always
        # meet, and a rare collision is only one more candidate for the similarity check below;
        # integer keys keep the join small enough to run (and spill) under the memory limit.
        self._db.execute(f"""
            CREATE OR REPLACE TEMP TABLE candidates AS
            WITH banded AS (
                SELECT key, run, band, hash(list_slice({kind}, band * {rows} + 1, (band + 1) * {rows})) AS h
                FROM signatures, range({bands}) AS t(band)
            )
            SELECT DISTINCT a.key AS key, b.key AS other
            FROM banded a JOIN banded b ON a.band = b.band AND a.h = b.h
            WHERE a.run AND (NOT b.run OR b.key < a.key)""")
        cursor = self._db.execute(f"""
            SELECT c.key, c.other, o.run, o.rank, s.{kind}, o.{kind}
            FROM candidates c JOIN signatures s ON s.key = c.key AND s.run JOIN signatures o ON o.key = c.other""")
        while chunk := cursor.fetchmany(_BATCH):
            for key, other, other_run, rank, mine, theirs in chunk:
                similarity = float(np.count_nonzero(np.asarray(mine) == np.asarray(theirs))) / NUM_PERM
                if similarity >= self.threshold:  # LSH candidates include some below it
                    yield Pair(key, other, other_run, rank, kind, similarity)  # type: ignore[arg-type]
