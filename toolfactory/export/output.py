"""Where an export's files go: a local folder or an ``s3://`` prefix, every file streamed.

An export can be larger than memory, so files are written as records arrive instead of through
:meth:`ObjectStore.write_bytes` (which takes the whole content). Each file still appears whole,
as every shard of a run does (docs/architecture.md §4): locally it is written under a temporary name and
renamed into place when complete; on S3 the object appears when its upload completes, and a
file whose export failed is deleted. Small writes are gathered into 1 MiB blocks because a
pyarrow output stream does one system call (or one part upload) per write.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from toolfactory.config import StorageConfig
from toolfactory.storage import ObjectStore

_BLOCK = 1 << 20


class OutputFile:
    """One file being written; :meth:`commit` makes it visible, :meth:`discard` drops it."""

    def __init__(self, store: ObjectStore, name: str) -> None:
        self.name = name
        self._store = store
        self._fs = store.fs
        self._final = f"{store.base}/{name}"
        parent = self._final.rsplit("/", 1)[0]
        if store.atomic_rename:
            self._fs.create_dir(parent, recursive=True)
            self._temporary: str | None = f"{parent}/.tmp-{uuid.uuid4().hex}"
        else:
            self._temporary = None
        self._stream = self._fs.open_output_stream(self._temporary or self._final)
        self._buffer = bytearray()
        self.rows = 0

    def write(self, data: bytes) -> None:
        self._buffer += data
        if len(self._buffer) >= _BLOCK:
            self._flush()

    @property
    def raw(self) -> pa.NativeFile:
        """The underlying stream, for writers that buffer themselves (Parquet)."""
        self._flush()
        return self._stream

    def _flush(self) -> None:
        if self._buffer:
            self._stream.write(bytes(self._buffer))
            self._buffer.clear()

    def commit(self) -> None:
        self._flush()
        self._stream.close()
        if self._temporary is not None:
            self._fs.move(self._temporary, self._final)

    def discard(self) -> None:
        if not self._stream.closed:
            self._stream.close()
        if self._temporary is None:
            self._store.delete(self.name)
        elif self._fs.get_file_info(self._temporary).type != pafs.FileType.NotFound:
            self._fs.delete_file(self._temporary)


class OutputDir:
    """The export's root: a local folder (created) or ``s3://bucket/prefix``."""

    def __init__(self, root: str | Path, *, endpoint_url: str | None = None, region: str | None = None,
                 storage: StorageConfig | None = None) -> None:
        # `storage`: the run's storage settings (retries, timeouts) for an S3 destination.
        settings = storage or StorageConfig()
        self.store = ObjectStore.open(settings.model_copy(update={"root": str(root), "endpoint_url": endpoint_url, "region": region}))

    @property
    def url(self) -> str:
        return self.store.url

    def open(self, name: str) -> OutputFile:
        return OutputFile(self.store, name)

    def write_bytes(self, name: str, data: bytes) -> None:
        """A small file written at once (a README, one ToolBench answer), atomically."""
        self.store.write_bytes(name, data)

    def clear(self, folder: str) -> None:
        """Delete everything under `folder` (a folder of one file per record that the export owns:
        files a previous export left there would otherwise mix with this one's)."""
        self.store.delete_tree(folder.strip("/"))


def json_line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode()


class JsonLines:
    """A JSONL file: one JSON value a line."""

    def __init__(self, out: OutputDir, name: str) -> None:
        self.file = out.open(name)

    def write(self, value: Any) -> None:
        self.file.write(json_line(value))
        self.file.rows += 1

    def commit(self) -> int:
        self.file.commit()
        return self.file.rows

    def discard(self) -> None:
        self.file.discard()


class JsonList(JsonLines):
    """A JSON list written item by item (ToolBench's and ToolAlpaca's files are JSON lists, which
    their loaders read with one ``json.load``)."""

    def __init__(self, out: OutputDir, name: str) -> None:
        super().__init__(out, name)
        self.file.write(b"[")

    def write(self, value: Any) -> None:
        separator = b"\n" if self.file.rows == 0 else b",\n"
        self.file.write(separator + json.dumps(value, ensure_ascii=False).encode())
        self.file.rows += 1

    def commit(self) -> int:
        self.file.write(b"\n]\n")
        return super().commit()
