"""Object storage: a local folder or an S3 bucket, through one small interface.

Every write is whole or nothing: locally a temporary file is renamed into place, on S3 the
object appears when its upload completes. Paths are relative to the storage root and always
use ``/``.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from toolfactory.config import StorageConfig


@dataclass
class ObjectStore:
    fs: pafs.FileSystem
    base: str  # the root inside `fs`: an absolute folder, or bucket/prefix
    url: str  # the root as the user wrote it, for messages and links
    atomic_rename: bool

    @classmethod
    def open(cls, config: StorageConfig) -> ObjectStore:
        if config.is_s3:
            return cls(
                fs=_s3_filesystem(config),
                base=config.root.removeprefix("s3://").rstrip("/"),
                url=config.root.rstrip("/"),
                atomic_rename=False,
            )
        base = str(Path(config.root).expanduser().resolve())
        os.makedirs(base, exist_ok=True)
        return cls(fs=pafs.LocalFileSystem(), base=base, url=base, atomic_rename=True)

    def _full(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def uri(self, path: str) -> str:
        return f"{self.url}/{path.lstrip('/')}"

    def write_bytes(self, path: str, data: bytes) -> None:
        full = self._full(path)
        if not self.atomic_rename:  # S3: the object appears when its upload completes
            with self.fs.open_output_stream(full) as out:
                out.write(data)
            return
        parent = full.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        temporary = f"{parent}/.tmp-{uuid.uuid4().hex}"
        try:
            with self.fs.open_output_stream(temporary) as out:
                out.write(data)
            self.fs.move(temporary, full)
        finally:
            if self.fs.get_file_info(temporary).type != pafs.FileType.NotFound:
                self.fs.delete_file(temporary)

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(self._full(path)) as stream:
            return bytes(stream.read())

    def read_bytes_or_none(self, path: str) -> bytes | None:
        try:
            return self.read_bytes(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if "NoSuchKey" in str(exc) or "Path does not exist" in str(exc):
                return None
            raise

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(self._full(path)).type == pafs.FileType.File

    def list(self, prefix: str) -> list[str]:
        """Relative paths of the files under `prefix`, sorted; temporary files excluded."""
        selector = pafs.FileSelector(self._full(prefix), recursive=True, allow_not_found=True)
        paths = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File or "/.tmp-" in info.path:
                continue
            paths.append(info.path[len(self.base) + 1 :])
        return sorted(paths)

    def remove_temporary(self, prefix: str) -> int:
        """Delete temporary files left under `prefix` by writes that were killed; their count."""
        selector = pafs.FileSelector(self._full(prefix), recursive=True, allow_not_found=True)
        stale = [i.path for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File and "/.tmp-" in i.path]
        for path in stale:
            self.fs.delete_file(path)
        return len(stale)

    def delete(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_file(self._full(path))


def _s3_filesystem(config: StorageConfig) -> pafs.S3FileSystem:
    # Credentials come from the standard AWS chain (env, profile, IAM), never from the config.
    kwargs: dict[str, object] = {}
    endpoint = config.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs["endpoint_override"] = host.rstrip("/") if host else endpoint
        kwargs["scheme"] = scheme if host else "https"
    region = config.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)  # type: ignore[arg-type]
