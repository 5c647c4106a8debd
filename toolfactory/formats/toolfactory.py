"""Our own records: a Parquet shard written by the pipeline, or JSONL of Dialogue objects.

* Parquet (recognised by its ``PAR1`` magic, whatever the file name): the ``record`` column holds
  each Dialogue as JSON text (:mod:`toolfactory.storage.shards`). Accepted shards (``id``, ``record``)
  and rejected shards (``id``, ``stage``, ``reasons``, ``detail``, ``record``) both qualify.
* JSONL: one Dialogue JSON object a line (a JSON list of them is accepted too).
* A directory: its ``*.parquet`` and ``*.jsonl`` files (not subdirectories, so a stage folder's
  ``rejected/`` parts are not mixed in), in name order, records numbered across files.

A record is validated by the canonical model (unknown fields are rejected): a record the model
refuses is ``invalid_record``. Mode and every other field are the record's own; verdicts a
previous verify stored are ignored by the rules (which judge the record afresh).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from toolfactory.formats.base import (
    MISSING_FIELD,
    RECORD_NOT_OBJECT,
    FormatError,
    UnreadableFile,
    guarded,
    iter_json_records,
    require_path,
    text_error,
)
from toolfactory.models import Dialogue
from toolfactory.render.parsed import standard_json

NAME = "toolfactory"
# Every rule applies: the pipeline's records are complete dialogues whose mode is a real claim.
NOT_APPLICABLE_REASONS: dict[str, str] = {}
NOT_APPLICABLE: frozenset[str] = frozenset(NOT_APPLICABLE_REASONS)

_PARQUET_MAGIC = b"PAR1"


def is_parquet(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == _PARQUET_MAGIC


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    # Imported for a Parquet file only: pyarrow takes half a second to import, and a JSONL file
    # of any format does not need it.
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a broken file
        raise UnreadableFile(f"{path}: not a readable Parquet file: {exc}") from None
    if "record" not in parquet.schema_arrow.names:
        raise UnreadableFile(f"{path}: a toolfactory shard has a 'record' column (columns: {parquet.schema_arrow.names})")
    row = 0
    for batch in parquet.iter_batches(columns=["record"]):
        for text in batch.column(0).to_pylist():
            row += 1
            yield f"{path.name} row {row}", text


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".parquet", ".jsonl"))
        if not files:
            raise UnreadableFile(f"{path}: no .parquet or .jsonl files")
        return files
    return [path]


def _dialogue(index: int, where: str, value: Any) -> Dialogue | FormatError:
    if isinstance(value, FormatError):
        return FormatError(index, value.reason, value.message, where)
    if value is None:
        return FormatError(index, MISSING_FIELD, "the record column is empty", where)
    if isinstance(value, str):
        try:
            value = standard_json(value)
        except Exception as exc:  # noqa: BLE001 - RecursionError too: text_error names each
            return text_error(index, where, exc)
    if not isinstance(value, dict):
        return FormatError(index, RECORD_NOT_OBJECT, f"a record must be a JSON object, not {type(value).__name__}", where)
    return guarded(index, where, lambda: Dialogue.model_validate(value))


def read(path: str | Path) -> Iterator[Dialogue | FormatError]:
    index = 0
    for file in _files(require_path(path)):
        rows = _parquet_rows(file) if is_parquet(file) else ((f"{file.name} {where}", value) for _, where, value in iter_json_records(file))
        for where, value in rows:
            yield _dialogue(index, where, value)
            index += 1
