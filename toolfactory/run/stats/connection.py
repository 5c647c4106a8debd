"""Opening the stats file: briefly, one connection per file and thread, waiting out other processes.

During a run its flow is the only writer of the run's rows. Each write (or short burst of them,
:func:`burst`) opens the file, writes and closes it, so `toolfactory stats` can read while a run
goes on.
"""

from __future__ import annotations

import itertools
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
from tenacity import retry, retry_if_exception, stop_after_delay, wait_random

from toolfactory.run.stats.schema import create

# The file is attached to one in-memory DuckDB of this process, not opened as a DuckDB of its own:
# a new DuckDB costs about 15 ms of CPU whatever it opens (it registers every built-in function).
# Measured side by side on a small stats file: an open, a statement and a close took 17 ms as a
# DuckDB of its own, 3 ms as an attachment. DETACH closes the file as closing its own DuckDB did:
# checkpointed, and its lock released for other processes. A forked child makes its own.
_HOST: tuple[int, duckdb.DuckDBPyConnection] | None = None
_HOST_GUARD = threading.Lock()
_NAMES = itertools.count()


def _host() -> duckdb.DuckDBPyConnection:
    global _HOST
    with _HOST_GUARD:
        if _HOST is None or _HOST[0] != os.getpid():
            _HOST = (os.getpid(), duckdb.connect(":memory:"))
        return _HOST[1]


@retry(
    retry=retry_if_exception(lambda exc: isinstance(exc, duckdb.IOException) and "lock" in str(exc)),
    wait=wait_random(0.05, 0.25),
    stop=stop_after_delay(30),
    reraise=True,
)
def _attach(con: duckdb.DuckDBPyConnection, path: Path, name: str, read_only: bool) -> None:
    """Attach the file, waiting while another process holds it (the flow writes in short bursts)."""
    quoted = str(path).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS {name}" + (" (READ_ONLY)" if read_only else ""))


@contextmanager
def _open(path: Path, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default database is the file, attached until the block ends. The caller
    holds the file's lock, and reads and writes nested in a burst use the burst's connection, so
    a file is attached once at a time."""
    con = _host().cursor()
    name = f"stats_{next(_NAMES)}"
    try:
        _attach(con, path, name, read_only)
        try:
            con.execute(f"USE {name}")
            yield con
        finally:
            con.execute("USE memory")
            con.execute(f"DETACH {name}")
    finally:
        con.close()


# One connection per file at a time in a process: the stage flows of a run that run at once (in
# threads) write to one file, and a second connection of the same process would conflict with
# the first (a write-write conflict on the schema, or a read-only open beside a writable one).
# Other processes wait for the file's lock instead (see _open).
_FILE_LOCKS: dict[Path, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _file_lock(path: Path) -> threading.RLock:
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(path.resolve(), threading.RLock())


# Each file as this process's last write left it (device, inode, size, modification time): a
# write that finds it so skips the schema and the migration, which would find nothing to do
# (measured: a write's open went from 86 to 26 ms, and a small run's driver writes about 50 times).
# A file another process wrote, or deleted and made again, no longer matches, and gets them again.
_LEFT_BY_US: dict[Path, tuple[int, int, int, int] | None] = {}


def _state(path: Path) -> tuple[int, int, int, int] | None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


# The connection a thread holds open for a burst of writes to one file (burst).
_HELD = threading.local()


@contextmanager
def connect(path: Path, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the stats file at `path` (the burst's, within one); a writable one
    creates the file and brings its schema up to date first."""
    held = getattr(_HELD, "connections", {}).get(path)
    if held is not None:
        yield held
        return
    with _file_lock(path):
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        found = None if read_only else _state(path)
        as_we_left_it = found is not None and found == _LEFT_BY_US.get(path)
        try:
            with _open(path.resolve(), read_only) as con:
                if not read_only and not as_we_left_it:
                    create(con)
                yield con
        finally:
            if not read_only:
                _LEFT_BY_US[path] = _state(path)


@contextmanager
def burst(path: Path) -> Iterator[None]:
    """Hold one connection open for every read and write of the block (in this thread), so that
    the driver's bookkeeping after a group of stages opens the file once, not once per statement
    (each open costs about 3 ms, see :func:`_open`); other processes wait for the block's end."""
    held: dict[Path, duckdb.DuckDBPyConnection] = _HELD.__dict__.setdefault("connections", {})
    if path in held:
        yield
        return
    with connect(path) as con:
        held[path] = con
        try:
            yield
        finally:
            del held[path]


@contextmanager
def transaction(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One write transaction (committed when the block ends, rolled back if it raises)."""
    with connect(path) as con:
        con.execute("BEGIN")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
