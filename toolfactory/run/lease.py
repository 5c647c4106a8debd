"""One run at a time on a storage root: a lease on `<root>/pool/_lease.json`.

The pool in `<root>/pool` is shared by every run on a root: a run plans against the pool files
that exist when it starts, and adds to them. Two runs planned against the same pool would both
take the same catalog tools for new and both publish them, and could keep the same dialogues.
So a run holds the root's lease from planning to its end, and another run on the same root waits
for it (`run.root_in_use: wait`, up to `run.root_wait_s`) or fails at once with one message naming
the holder (`fail`).

- Locally the lease is an exclusive `flock` on the file: the kernel releases it when the holder's
  process ends, however it ends.
- On S3 it is an object created only if absent (`If-None-Match: *`), renewed by its holder every
  `RENEW_S` seconds with a compare-and-swap on its ETag (`If-Match`), and taken over the same way
  once it has not been renewed for `TTL_S` seconds (its holder died). A holder that loses its lease
  (it could not renew it for a whole TTL) is told so when it releases it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from toolfactory.errors import TerminalError
from toolfactory.storage import ObjectStore

LEASE = "pool/_lease.json"
TTL_S = 120.0
RENEW_S = 30.0
POLL_S = 2.0
REPORT_S = 60.0  # how often a waiting run says it still waits


class RootInUse(TerminalError):
    """Another run holds the storage root."""


@dataclass
class _Holder:
    run_id: str
    since: float = field(default_factory=time.time)

    def body(self) -> bytes:
        return json.dumps({"run_id": self.run_id, "host": socket.gethostname(), "pid": os.getpid(),
                           "since": self.since, "renewed": time.time()}).encode()


def _busy(store: ObjectStore, holder: dict[str, Any], run_id: str, waited: float | None) -> RootInUse:
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.get("since", 0)))
    how = f"after waiting {waited:.0f} s" if waited is not None else "(run.root_in_use: fail)"
    return RootInUse(
        f"storage root {store.url} is in use by run {holder.get('run_id', '?')} (on {holder.get('host', '?')} since "
        f"{since}); run {run_id} did not start {how}: runs on one root share its pool and go one at a time"
    )


def _waiting(store: ObjectStore, holder: dict[str, Any], run_id: str, waited: float, wait_s: float) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.get("since", 0)))
    return (f"run {run_id} waits for storage root {store.url}, in use by run {holder.get('run_id', '?')} "
            f"(on {holder.get('host', '?')} since {since}): waited {waited:.0f} s of {wait_s:.0f} s (run.root_wait_s)")


@contextlib.contextmanager
def root_lease(store: ObjectStore, run_id: str, wait: bool, wait_s: float,
               report: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the root's lease for the block (see the module doc). While it waits, `report` is
    told who holds the root when the wait starts and every `REPORT_S` seconds after: a run
    waiting for minutes must not look hung."""
    lease = _S3Lease(store, run_id) if store.s3 is not None else _LocalLease(store, run_id)
    started = time.monotonic()
    reported: float | None = None
    while not lease.try_acquire():
        holder = lease.holder()
        if not wait:
            raise _busy(store, holder, run_id, None)
        now = time.monotonic()
        if now - started >= wait_s:
            raise _busy(store, holder, run_id, wait_s)
        if report is not None and (reported is None or now - reported >= REPORT_S):
            report(_waiting(store, holder, run_id, now - started, wait_s))
            reported = now
        time.sleep(POLL_S)
    try:
        yield
    finally:
        lease.release()


class _LocalLease:
    def __init__(self, store: ObjectStore, run_id: str) -> None:
        self.path = os.path.join(store.base, LEASE)
        self.run_id = run_id
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, _Holder(self.run_id).body(), 0)
        self._fd = fd
        return True

    def holder(self) -> dict[str, Any]:
        try:
            with open(self.path) as handle:
                return json.loads(handle.read() or "{}")
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class _S3Lease:
    def __init__(self, store: ObjectStore, run_id: str) -> None:
        from toolfactory.storage import _s3_client

        assert store.s3 is not None
        self.client = _s3_client(*store.s3)
        self.bucket, self.key = store._bucket_key(LEASE)
        self.holder_state = _Holder(run_id)
        self.etag: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = False

    def _put(self, **condition: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self.holder_state.body(), **condition)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                return False
            raise
        self.etag = answer["ETag"]
        return True

    def _read(self) -> tuple[dict[str, Any], str | None]:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return {}, None
            raise
        return json.loads(answer["Body"].read() or b"{}"), answer["ETag"]

    def try_acquire(self) -> bool:
        if self._put(IfNoneMatch="*"):
            return self._started()
        body, etag = self._read()
        if etag is None:
            return False  # released between the two requests: the next attempt creates it
        if time.time() - float(body.get("renewed", 0)) > TTL_S and self._put(IfMatch=etag):
            return self._started()  # its holder stopped renewing it: it died
        return False

    def holder(self) -> dict[str, Any]:
        return self._read()[0]

    def _started(self) -> bool:
        self._renewer = threading.Thread(target=self._renew, name="root-lease", daemon=True)
        self._renewer.start()
        return True

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                if self.etag is None or not self._put(IfMatch=self.etag):
                    self.lost = True
                    return
            except Exception:  # storage hiccup: try again at the next tick, the TTL leaves room
                continue

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=10)
        _, etag = self._read()
        if etag is not None and etag == self.etag:
            self.client.delete_object(Bucket=self.bucket, Key=self.key)
        if self.lost:
            raise RootInUse(f"run {self.holder_state.run_id} lost the lease of s3://{self.bucket}/{self.key}: "
                            "another run may have used the pool at the same time")
