"""Shard files of a run and the order in which they are committed.

A shard of stage S writes, in this order::

    runs/<run_id>/<S>/rejected/part-NNNNN.parquet   records the stage rejected, with reasons
    runs/<run_id>/<S>/_metrics/part-NNNNN.json      the shard's metrics
    runs/<run_id>/<S>/part-NNNNN.parquet            the accepted records: the commit marker

A shard is done exactly when its main part exists. Every file name is a function of
(run, stage, shard), so a re-run of an interrupted shard overwrites what it had left and can
never duplicate a record; the metrics sidecar lets the stats database be rebuilt from storage
if the flow died before recording them. The sidecar also records the size and SHA-256 of the
rejected and main parts (``files``), serialized before either is written, so a part damaged
after its commit is told from a good one (:mod:`toolfactory.run.integrity`).
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from toolfactory.storage.checksums import FileSum, write_summed
from toolfactory.models import Record, Rejected
from toolfactory.storage import ObjectStore

log = logging.getLogger(__name__)

# The sidecar's record of the shard's files: path -> {size, sha256} (not part of the metrics).
FILES = "files"
# Reason code of a metrics sidecar that is not JSON (empty, truncated): the shard is not done.
METRICS_UNREADABLE = "metrics_unreadable"

_RECORDS_SCHEMA = pa.schema([("id", pa.string()), ("record", pa.string())])
_REJECTED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("stage", pa.string()),
        ("reasons", pa.list_(pa.string())),
        ("detail", pa.string()),
        ("record", pa.string()),
    ]
)


@dataclass(frozen=True)
class ShardPaths:
    run_id: str
    stage: str
    index: int

    @property
    def _name(self) -> str:
        return f"part-{self.index:05d}"

    @property
    def main(self) -> str:
        return f"runs/{self.run_id}/{self.stage}/{self._name}.parquet"

    @property
    def rejected(self) -> str:
        return f"runs/{self.run_id}/{self.stage}/rejected/{self._name}.parquet"

    @property
    def metrics(self) -> str:
        return f"runs/{self.run_id}/{self.stage}/_metrics/{self._name}.json"


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def encode_records(records: Iterable[Record], stage: str) -> tuple[list[tuple[str, str]], list[Rejected]]:
    """(id, JSON) rows of the records that can be stored, and rejections for those that cannot.

    An LLM can return text no UTF-8 file can hold (a lone surrogate escape such as ``\\ud800``);
    that record is rejected with a reason instead of failing the whole shard on every retry.
    """
    rows: list[tuple[str, str]] = []
    unstorable: list[Rejected] = []
    for record in records:
        record_id = str(record.id)
        try:
            rows.append((record_id, record.to_json()))
        except ValueError as exc:  # pydantic's serialization error is a ValueError
            unstorable.append(Rejected(id=record_id, stage=stage, reasons=["record_unserializable"], detail=str(exc)[:500]))
    return rows, unstorable


def records_table(rows: list[tuple[str, str]]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "record": [r[1] for r in rows]}, schema=_RECORDS_SCHEMA)


def rejected_table(rejected: Iterable[Rejected]) -> pa.Table:
    items = list(rejected)
    return pa.table(
        {
            "id": [r.id for r in items],
            "stage": [r.stage for r in items],
            "reasons": [r.reasons for r in items],
            "detail": [r.detail for r in items],
            # ASCII-escaped, so that any text a record holds can be written
            "record": [json.dumps(r.record) for r in items],
        },
        schema=_REJECTED_SCHEMA,
    )


def commit_shard(
    store: ObjectStore,
    paths: ShardPaths,
    rows: list[tuple[str, str]],
    rejected: list[Rejected],
    metrics: dict[str, Any],
) -> None:
    """Write a shard's files, the main part last (see the module doc for why), with the size and
    checksum of both parts in the metrics sidecar."""
    rejected_part, main_part = _parquet_bytes(rejected_table(rejected)), _parquet_bytes(records_table(rows))
    files = {paths.rejected: FileSum.of(rejected_part).to_dict(), paths.main: FileSum.of(main_part).to_dict()}
    store.write_bytes(paths.rejected, rejected_part)
    store.write_bytes(paths.metrics, json.dumps({**metrics, FILES: files}, sort_keys=True).encode())
    store.write_bytes(paths.main, main_part)


def write_rows(store: ObjectStore, path: str, rows: list[tuple[str, str]]) -> None:
    """Write (id, JSON) rows as one records file, atomically (exports)."""
    store.write_bytes(path, _parquet_bytes(records_table(rows)))


def write_summed_rows(store: ObjectStore, path: str, rows: list[tuple[str, str]]) -> None:
    """Write (id, JSON) rows as one records file, atomically, its size and checksum recorded
    beside it first (pool files, which later runs read: :mod:`toolfactory.storage.checksums`)."""
    write_summed(store, path, _parquet_bytes(records_table(rows)))


def read_records(store: ObjectStore, path: str) -> list[dict[str, Any]]:
    table = pq.read_table(io.BytesIO(store.read_bytes(path)))
    return [json.loads(text) for text in table.column("record").to_pylist()]


def iter_records(store: ObjectStore, path: str, batch_size: int = 2_000) -> Iterator[dict[str, Any]]:
    """The records of a file, parsed `batch_size` at a time (a reader that keeps only what it
    needs of each never holds the file's records at once)."""
    file = pq.ParquetFile(io.BytesIO(store.read_bytes(path)))
    for batch in file.iter_batches(batch_size=batch_size, columns=["record"]):
        for text in batch.column(0).to_pylist():
            yield json.loads(text)


def read_ids(store: ObjectStore, path: str) -> list[str]:
    """The record ids of a file, without parsing its records."""
    return pq.read_table(io.BytesIO(store.read_bytes(path)), columns=["id"]).column("id").to_pylist()


def read_rejected(store: ObjectStore, path: str) -> list[dict[str, Any]]:
    table = pq.read_table(io.BytesIO(store.read_bytes(path)))
    return table.to_pylist()


def read_sidecar(store: ObjectStore, paths: ShardPaths) -> dict[str, Any] | None:
    """The shard's metrics sidecar as written (with ``files``); None if there is none. Raises
    ValueError when it is not a JSON object (empty, truncated)."""
    data = store.read_bytes_or_none(paths.metrics)
    if data is None:
        return None
    sidecar = json.loads(data)  # a UnicodeDecodeError and a JSONDecodeError are ValueErrors
    if not isinstance(sidecar, dict):
        raise ValueError(f"not a JSON object but {type(sidecar).__name__}")
    return sidecar


def read_metrics(store: ObjectStore, paths: ShardPaths) -> dict[str, Any] | None:
    """The shard's metrics; None when there are none or they cannot be read — then the shard is
    not done, and running it again writes them anew."""
    try:
        sidecar = read_sidecar(store, paths)
    except ValueError as exc:
        log.warning("%s: %s: %s", METRICS_UNREADABLE, store.uri(paths.metrics), exc)
        return None
    if sidecar is not None:
        sidecar.pop(FILES, None)
    return sidecar


def stage_parts(store: ObjectStore, run_id: str, stage: str) -> list[str]:
    """The committed main parts of a stage, in shard order (not ``rejected/`` nor ``_metrics/``)."""
    main = re.compile(rf"runs/{re.escape(run_id)}/{re.escape(stage)}/part-\d+\.parquet")
    return [path for path in store.list(f"runs/{run_id}/{stage}/") if main.fullmatch(path)]


def dataset_parts(store: ObjectStore, run_id: str) -> list[str]:
    """The parts holding a run's dataset: the curate stage's, or the verify stage's accepted
    records for a run that has no curate output (made before that stage existed)."""
    return stage_parts(store, run_id, "curate") or stage_parts(store, run_id, "verify")
