"""Object storage: a local folder or an S3 bucket, through one small interface.

Every write is whole or nothing: locally a temporary file is renamed into place, on S3 the
object appears when its upload completes. Paths are relative to the storage root and always
use ``/``.

On S3 nothing is ever deleted through pyarrow: its file system keeps folders as zero-byte
objects whose key ends with ``/`` and writes one for the parent of every file or folder it
deletes, and such an object is a file and a folder at once to any tool that mirrors keys to files.
Deletes go to boto3, which deletes the keys and nothing else.

S3 hiccups (connection errors, timeouts, 5xx answers, throttling) are retried with backoff by
the AWS SDKs themselves (`storage.max_attempts`, standard retry mode); what still fails is a
:class:`StorageUnavailable`, a transient error, so the shard's task retries take over. S3
writes go through boto3's transfer manager, which aborts a multipart upload that fails; uploads
left by a killed process are aborted when the run is resumed (:meth:`ObjectStore.abort_uploads`).
"""

from __future__ import annotations

import errno
import functools
import io
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import pyarrow.fs as pafs

from toolfactory.config import StorageConfig
from toolfactory.errors import ConfigError, TransientError

T = TypeVar("T")
# Above this size an S3 write is a multipart upload (below it, one PUT that cannot be left half-done).
_MULTIPART_THRESHOLD = 64 << 20
# What pyarrow's and botocore's messages say when a request may succeed if sent again.
_TRANSIENT_SIGNS = (
    "NETWORK_CONNECTION", "curlCode", "Timeout", "timed out", "Connection", "connection", "SlowDown", "Throttl",
    "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "HTTP response code: 5", "(500)", "(502)", "(503)",
    "(504)", "Could not connect",
)


class StorageUnavailable(TransientError):
    """Storage did not answer, or answered that it is busy, after every attempt."""


@dataclass
class ObjectStore:
    fs: pafs.FileSystem
    base: str  # the root inside `fs`: an absolute folder, or bucket/prefix
    url: str  # the root as the user wrote it, for messages and links
    atomic_rename: bool
    s3: tuple[str | None, str | None, int, float] | None = None  # endpoint, region, attempts, timeout

    @classmethod
    def open(cls, config: StorageConfig) -> ObjectStore:
        if config.is_s3:
            endpoint = config.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
            region = config.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            return cls(
                fs=_s3_filesystem(config, endpoint, region),
                base=config.root.removeprefix("s3://").rstrip("/"),
                url=config.root.rstrip("/"),
                atomic_rename=False,
                s3=(endpoint, region, config.max_attempts, config.timeout_s),
            )
        base = _local_root(config)
        return cls(fs=pafs.LocalFileSystem(), base=base, url=base, atomic_rename=True)

    def _guarded(self, what: str, path: str, action: Callable[[], T]) -> T:
        """Run a storage request; a transient failure that outlived the SDK's retries becomes
        :class:`StorageUnavailable` (a retry of the shard may succeed), any other error is kept."""
        try:
            return action()
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError):
            raise
        except Exception as exc:
            if not any(sign in f"{type(exc).__name__}: {exc}" for sign in _TRANSIENT_SIGNS):
                raise
            raise StorageUnavailable(f"storage {self.url} unavailable ({what} {path}): {type(exc).__name__}: {exc}"[:1000]) from exc

    def _bucket_key(self, path: str) -> tuple[str, str]:
        bucket, _, prefix = self._full(path).partition("/")
        return bucket, prefix

    def _full(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}"

    def uri(self, path: str) -> str:
        return f"{self.url}/{path.lstrip('/')}"

    def local_path(self, path: str) -> str | None:
        """`path` as a file name of this machine, for a local store (None on S3): for writers that
        cannot afford pyarrow's calls per file."""
        return self._full(path) if isinstance(self.fs, pafs.LocalFileSystem) else None

    def write_bytes(self, path: str, data: bytes) -> None:
        full = self._full(path)
        if self.s3 is not None:  # the object appears when its upload completes
            from boto3.s3.transfer import TransferConfig

            bucket, key = self._bucket_key(path)
            config = TransferConfig(multipart_threshold=_MULTIPART_THRESHOLD, use_threads=False)
            self._guarded("write", path, lambda: _s3_client(*self.s3).upload_fileobj(io.BytesIO(data), bucket, key, Config=config))  # type: ignore[misc]
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
        def read() -> bytes:
            with self.fs.open_input_stream(self._full(path)) as stream:
                return bytes(stream.read())

        return self._guarded("read", path, read)

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
        return self._guarded("stat", path, lambda: self.fs.get_file_info(self._full(path)).type == pafs.FileType.File)

    def list(self, prefix: str) -> list[str]:
        """Relative paths of the files under `prefix`, sorted; temporary files excluded."""
        selector = pafs.FileSelector(self._full(prefix), recursive=True, allow_not_found=True)
        paths = []
        for info in self._guarded("list", prefix, lambda: self.fs.get_file_info(selector)):
            if info.type != pafs.FileType.File or "/.tmp-" in info.path:
                continue
            paths.append(info.path[len(self.base) + 1 :])
        return sorted(paths)

    def _files(self, prefix: str) -> dict[str, pafs.FileInfo]:
        """Relative path -> what one listing says of each file under `prefix` (temporary files excluded)."""
        selector = pafs.FileSelector(self._full(prefix), recursive=True, allow_not_found=True)
        return {
            info.path[len(self.base) + 1 :]: info
            for info in self._guarded("list", prefix, lambda: self.fs.get_file_info(selector))
            if info.type == pafs.FileType.File and "/.tmp-" not in info.path
        }

    def versions(self, prefix: str) -> dict[str, str]:
        """The files under `prefix` (as :meth:`list`) with a version each: their size and time of
        last write, which change when a file is written again. One listing, no read."""
        return {path: f"{info.size}@{info.mtime_ns}" for path, info in self._files(prefix).items()}

    def version(self, path: str) -> str | None:
        """A version of one file that changes whenever it is written again (None: no such file):
        on S3 its ETag, the digest of what was uploaded (a time has only one-second resolution);
        locally its size and time of last write in nanoseconds."""
        if self.s3 is None:
            info = self._guarded("stat", path, lambda: self.fs.get_file_info(self._full(path)))
            return f"{info.size}@{info.mtime_ns}" if info.type == pafs.FileType.File else None
        bucket, key = self._bucket_key(path)
        client = _s3_client(*self.s3)
        try:
            head = self._guarded("stat", path, lambda: client.head_object(Bucket=bucket, Key=key))
        except Exception as exc:  # botocore's ClientError: a 404 is no such file
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return str(head["ETag"])

    def folders(self, prefix: str) -> list[str]:
        """Names of the folders directly under `prefix`, sorted (on S3: the common prefixes of one
        delimited listing, so the files below them are not listed)."""
        selector = pafs.FileSelector(self._full(prefix), recursive=False, allow_not_found=True)
        infos = self._guarded("list", prefix, lambda: self.fs.get_file_info(selector))
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)

    def sizes(self, prefix: str) -> dict[str, int]:
        """Relative path -> size in bytes of the files under `prefix` (one listing; on S3 the
        sizes come with it), temporary files excluded."""
        return {path: int(info.size) for path, info in self._files(prefix).items()}

    def open_input(self, path: str) -> Any:
        """A random-access reader of `path` (a Parquet footer is read without the whole file)."""
        return self._guarded("open", path, lambda: self.fs.open_input_file(self._full(path)))

    def remove_temporary(self, prefix: str) -> int:
        """Delete temporary files left under `prefix` by writes that were killed, and on S3 the
        folder objects (keys ending with ``/``) that deletes through pyarrow left; their count."""
        if self.s3 is not None:
            bucket, key_prefix = self._bucket_key(prefix.rstrip("/") + "/")
            keys = [key for key in self._s3_keys(bucket, key_prefix) if key.endswith("/") or "/.tmp-" in key]
            self._s3_delete(bucket, keys)
            return len(keys)
        selector = pafs.FileSelector(self._full(prefix), recursive=True, allow_not_found=True)
        stale = [i.path for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File and "/.tmp-" in i.path]
        for path in stale:
            self.fs.delete_file(path)
        return len(stale)

    def delete(self, path: str) -> None:
        if self.exists(path):
            self._delete_full(self._full(path))

    def delete_tree(self, prefix: str) -> None:
        """Delete every file under the folder `prefix` (none: nothing to do)."""
        if self.s3 is None:
            self.fs.delete_dir_contents(self._full(prefix), missing_dir_ok=True)
            return
        bucket, key_prefix = self._bucket_key(prefix.rstrip("/") + "/")
        self._s3_delete(bucket, self._s3_keys(bucket, key_prefix))

    def _delete_full(self, full: str) -> None:
        if self.s3 is None:
            self.fs.delete_file(full)
            return
        bucket, _, key = full.partition("/")
        self._guarded("delete", key, lambda: _s3_client(*self.s3).delete_object(Bucket=bucket, Key=key))  # type: ignore[misc]

    def _s3_keys(self, bucket: str, key_prefix: str) -> list[str]:
        pages = _s3_client(*self.s3).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix)  # type: ignore[misc]
        return self._guarded("list", key_prefix, lambda: [item["Key"] for page in pages for item in page.get("Contents", [])])

    def _s3_delete(self, bucket: str, keys: list[str]) -> None:
        client = _s3_client(*self.s3)  # type: ignore[misc]
        for start in range(0, len(keys), 1000):  # the most one DeleteObjects request takes
            batch = {"Objects": [{"Key": key} for key in keys[start:start + 1000]], "Quiet": True}
            answer = self._guarded("delete", keys[start], lambda: client.delete_objects(Bucket=bucket, Delete=batch))
            if answer.get("Errors"):
                error = answer["Errors"][0]
                raise OSError(f"storage {self.url}: cannot delete {error.get('Key')}: {error.get('Code')} {error.get('Message')}")

    def abort_uploads(self, prefix: str) -> int:
        """Abort the unfinished S3 multipart uploads under `prefix` (left by a killed process, they
        are invisible but billed); how many. A local store has none."""
        if self.s3 is None:
            return 0
        bucket, key_prefix = self._bucket_key(prefix)
        client = _s3_client(*self.s3)
        listed = self._guarded("list uploads", prefix, lambda: client.list_multipart_uploads(Bucket=bucket, Prefix=key_prefix))
        uploads = listed.get("Uploads", [])
        for upload in uploads:
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        return len(uploads)


def _local_root(config: StorageConfig) -> str:
    """The local root as an absolute folder, created if missing; a root that cannot be a folder
    is a config error naming the field, not an OSError deep in a run."""
    base = Path(config.root).expanduser().resolve()
    if base.exists() and not base.is_dir():
        raise ConfigError(f"storage.root: {base} is a file, not a folder")
    try:
        os.makedirs(base, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"storage.root: cannot create the folder {base}: {exc.strerror or exc}") from None
    return str(base)


def check_root(config: StorageConfig) -> None:
    """Refuse a local root that is not a writable folder, before a run starts anything.

    The test is a real write (a temporary file, deleted at once), which also catches a read-only
    or full file system, where the permission bits would say yes. An S3 root is checked by its
    first request."""
    if config.is_s3:
        return
    base = _local_root(config)
    probe = Path(base) / f".tmp-{uuid.uuid4().hex}"
    try:
        with probe.open("wb") as out:
            try:
                out.write(b"toolfactory")
                out.flush()
                os.fsync(out.fileno())  # a full disk may refuse only the data, not the name
            finally:
                probe.unlink()
    except OSError as exc:
        raise ConfigError(f"storage.root: cannot write in {base}: {exc.strerror or exc}") from None


def disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an error under it, is a full disk (ENOSPC): Python's, pyarrow's and
    DuckDB's own exceptions all say it in these words."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if (isinstance(cause, OSError) and cause.errno == errno.ENOSPC) or "No space left on device" in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _s3_filesystem(config: StorageConfig, endpoint: str | None, region: str | None) -> pafs.S3FileSystem:
    # Credentials come from the standard AWS chain (env, profile, IAM), never from the config.
    kwargs: dict[str, object] = {
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=config.max_attempts),
        "connect_timeout": config.timeout_s,
        "request_timeout": config.timeout_s,
    }
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs["endpoint_override"] = host.rstrip("/") if host else endpoint
        kwargs["scheme"] = scheme if host else "https"
    if region:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, region: str | None, attempts: int, timeout: float) -> Any:
    """One boto3 client per S3 setting and process (clients are thread-safe, and not picklable,
    so the store keeps only the settings)."""
    import boto3
    from botocore.config import Config as BotoConfig

    retries = {"mode": "standard", "max_attempts": attempts}
    config = BotoConfig(retries=retries, connect_timeout=timeout, read_timeout=timeout)  # type: ignore[arg-type]
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)
