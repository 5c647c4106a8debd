"""A session's files as state: each file by what it holds, not by its bytes.

Two sessions that did the same thing can leave files whose bytes differ: a database file keeps
free pages, checkpoints, headers with counters and timestamps (DuckDB's differ on every run), a
JSON file may order its keys otherwise. Comparing bytes would then reject every dialogue over
such a source. So a file is digested by its content where its format is known from its first
bytes:

* **SQLite**: its SQL dump (``iterdump``: the schema, then each table's rows in order);
* **DuckDB**: each table's name, columns and rows (sorted), read from a copy of the file and its
  write-ahead log (the server may hold a lock on the original);
* **JSON** (an object or an array, or JSON lines): the values, keys sorted;
* anything else: its bytes.

A file that cannot be read as its format says (a database half-written) is digested by its bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
DUCKDB_MAGIC = b"DUCK"  # at offset 8
BLOCK = 1 << 20
#: Larger text files are digested by their bytes (parsing them is not worth it).
JSON_MAX_BYTES = 16 * 1024 * 1024


def files_of(folder: Path) -> dict[str, str]:
    """Relative path → digest of what each regular file under `folder` holds (links not followed)."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and not _companion(path):
            found[path.relative_to(folder).as_posix()] = content_digest(path)
    return found


def content_digest(path: Path) -> str:
    """The digest of `path`'s content (see the module doc); ``kind:`` tells how it was read."""
    with path.open("rb") as handle:
        head = handle.read(16)
    try:
        if head.startswith(SQLITE_MAGIC):
            return "sqlite:" + _digest(_sqlite_dump(path))
        if head[8:12] == DUCKDB_MAGIC:
            return "duckdb:" + _digest(_duckdb_dump(path))
        if head.lstrip()[:1] in (b"{", b"[") and path.stat().st_size <= JSON_MAX_BYTES:
            return "json:" + _digest(_json_dump(path))
    except Exception:  # noqa: BLE001 - not readable as its format says: its bytes decide
        pass
    return _bytes_digest(path)


def _companion(path: Path) -> bool:
    """A database's journal or write-ahead log: part of the database, read with it."""
    name = path.name
    for suffix in ("-journal", "-wal", "-shm", ".wal"):
        if name.endswith(suffix):
            main = path.with_name(name[: -len(suffix)])
            if main.is_file():
                return True
    return False


def _digest(lines: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _bytes_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _sqlite_dump(path: Path) -> list[str]:
    # Read-only and immutable: never write to (or lock) the session's file.
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return list(conn.iterdump())


def _duckdb_dump(path: Path) -> list[str]:
    import duckdb

    with tempfile.TemporaryDirectory(prefix="toolfactory-state-") as folder:
        copy = Path(folder) / "state.duckdb"
        shutil.copyfile(path, copy)
        wal = path.with_name(path.name + ".wal")
        if wal.is_file():
            shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        conn = duckdb.connect(str(copy))
        try:
            tables = conn.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE' ORDER BY table_schema, table_name").fetchall()
            lines: list[str] = []
            for schema, table in tables:
                name = f'"{schema}"."{table}"'
                columns = conn.execute(f"DESCRIBE {name}").fetchall()
                lines.append(json.dumps([schema, table, [[c[0], c[1]] for c in columns]]))
                rows = conn.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
                lines += [json.dumps(list(row), default=str) for row in rows]
            return lines
        finally:
            conn.close()


def _json_dump(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    try:
        values = [json.loads(text)]
    except json.JSONDecodeError:
        values = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.dumps(value, sort_keys=True, ensure_ascii=False) for value in values]
