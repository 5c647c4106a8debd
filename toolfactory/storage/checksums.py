"""The size and SHA-256 of a committed file, recorded before the file itself is written.

A file that is written whole or not at all (docs/architecture.md §4, rule 1) can still be damaged
afterwards: truncated by a full disk or a copy cut short, changed by a faulty tool. Its recorded
size and checksum tell a damaged file from a good one without trusting the file:

* a shard's main and rejected parts: in its metrics sidecar (``files``), which the commit order
  writes after the rejected part and before the main part — both are serialized first, so their
  sums are known before either reaches storage, and the commit marker stays the main part;
* a pool file (``pool/<kind>/<name>.parquet``): in ``pool/<kind>/_sums/<name>.parquet.json``,
  written before the file, so a pool file never exists without its record (files written before
  sums were recorded have none: they are checked by opening them, see :mod:`toolfactory.run.integrity`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from toolfactory.storage import ObjectStore, StorageUnavailable

# Reason codes of a damaged file.
MISSING = "file_missing"  # recorded (or read by a committed shard), not in storage
SIZE_MISMATCH = "file_size_mismatch"  # its size is not the one recorded: truncated or grown
CHECKSUM_MISMATCH = "file_checksum_mismatch"  # the right size, other bytes
UNREADABLE = "parquet_unreadable"  # no record to compare with, and it does not open as Parquet


@dataclass(frozen=True)
class FileSum:
    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> FileSum:
        return cls(len(data), hashlib.sha256(data).hexdigest())

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any) -> FileSum | None:
        """The sum a record holds; None for a record that is not one (damaged or foreign)."""
        if not isinstance(data, dict) or not isinstance(data.get("size"), int) or not isinstance(data.get("sha256"), str):
            return None
        return cls(data["size"], data["sha256"])


def sum_path(path: str) -> str:
    """Where the sum of a file written by :func:`write_summed` is kept."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/_sums/{name}.json"


def write_summed(store: ObjectStore, path: str, data: bytes) -> None:
    """Write `data` to `path`, its sum first: the file never exists without its record."""
    store.write_bytes(sum_path(path), json.dumps(FileSum.of(data).to_dict(), sort_keys=True).encode())
    store.write_bytes(path, data)


def read_sum(store: ObjectStore, path: str) -> FileSum | None:
    """The recorded sum of a file written by :func:`write_summed`; None when there is none, or
    when its record cannot be read (the file is then checked as one written before sums were)."""
    data = store.read_bytes_or_none(sum_path(path))
    if data is None:
        return None
    try:
        return FileSum.from_dict(json.loads(data))
    except ValueError:
        return None


@dataclass(frozen=True)
class Damage:
    """A committed file that cannot be trusted: its path, a reason code and what was found."""

    path: str
    reason: str
    detail: str

    def line(self, store: ObjectStore) -> str:
        return f"{self.reason}: {store.uri(self.path)} ({self.detail})"


def check_file(store: ObjectStore, path: str, size: int | None, recorded: FileSum | None, checksums: bool) -> Damage | None:
    """Why the file at `path` (of `size` bytes as listed; None: absent) is damaged, or None.

    The size is compared first, which costs nothing beyond the listing; the checksum only when
    `checksums` asks for it, since that reads the whole file. A file without a recorded sum
    (written before sums were recorded) must open as Parquet: its footer is read, or, with
    `checksums`, every page."""
    if size is None:
        return Damage(path, MISSING, "committed, no longer in storage")
    if recorded is not None:
        if size != recorded.size:
            return Damage(path, SIZE_MISMATCH, f"{size} bytes, {recorded.size} recorded at commit")
        if checksums and hashlib.sha256(store.read_bytes(path)).hexdigest() != recorded.sha256:
            return Damage(path, CHECKSUM_MISMATCH, "its SHA-256 is not the one recorded at commit")
        return None
    return unreadable(store, path, whole=checksums)


def unreadable(store: ObjectStore, path: str, whole: bool = False) -> Damage | None:
    """Why `path` does not open as Parquet (its footer; with `whole`, every page), or None."""
    try:
        with store.open_input(path) as stream:
            file = pq.ParquetFile(stream)
            if whole:
                file.read()
    except (StorageUnavailable, FileNotFoundError):
        raise
    except Exception as exc:  # pyarrow says ArrowInvalid, OSError, … for a file cut short
        return Damage(path, UNREADABLE, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300])
    return None
