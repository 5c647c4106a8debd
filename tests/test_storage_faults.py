"""S3 that stops answering, on a real S3 server in its own process (moto's), paused with SIGSTOP
and killed: hiccups are retried inside the request, an outage becomes a transient error that the
shard's task retries, and no multipart upload is left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import boto3
import httpx
import pytest

from conftest import http
from toolfactory.config import StorageConfig
from toolfactory.errors import TransientError
from toolfactory.storage import ObjectStore, StorageUnavailable

MOTO_SERVER = str(Path(sys.executable).with_name("moto_server"))


@pytest.fixture
def s3_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            http.get(endpoint, timeout=1)
            break
        except httpx.TransportError:
            assert process.poll() is None and time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.2)
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="faults")
    yield process, endpoint
    if process.poll() is None:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait()


def _store(endpoint: str, **settings: object) -> ObjectStore:
    return ObjectStore.open(StorageConfig(root="s3://faults/root", endpoint_url=endpoint, region="us-east-1", **settings))  # type: ignore[arg-type]


def _uploads(endpoint: str) -> list[dict[str, object]]:
    listed = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").list_multipart_uploads(Bucket="faults")
    return list(listed.get("Uploads", []))


@pytest.mark.fault_matrix
def test_a_paused_server_is_waited_for_and_the_write_lands_whole(s3_process: tuple[subprocess.Popen[bytes], str]) -> None:
    process, endpoint = s3_process
    store = _store(endpoint, timeout_s=1.0, max_attempts=10)
    data = os.urandom(3 << 20)
    os.kill(process.pid, signal.SIGSTOP)
    threading.Timer(4.0, os.kill, (process.pid, signal.SIGCONT)).start()
    store.write_bytes("runs/r/part-00000.parquet", data)  # retried across the pause
    assert store.read_bytes("runs/r/part-00000.parquet") == data
    assert _uploads(endpoint) == []


@pytest.mark.fault_matrix
def test_an_outage_is_a_transient_error_naming_the_storage(s3_process: tuple[subprocess.Popen[bytes], str]) -> None:
    process, endpoint = s3_process
    store = _store(endpoint, timeout_s=0.5, max_attempts=2)
    store.write_bytes("runs/r/a.json", b"{}")
    process.kill()
    process.wait()
    for request in (lambda: store.write_bytes("runs/r/b.json", b"{}"), lambda: store.read_bytes("runs/r/a.json"),
                    lambda: store.list("runs/r/")):
        with pytest.raises(StorageUnavailable) as raised:
            request()
        assert isinstance(raised.value, TransientError)  # the shard task's retry condition
        assert "storage s3://faults/root unavailable" in str(raised.value)


@pytest.mark.fault_matrix
def test_a_missing_object_is_not_an_outage(s3_process: tuple[subprocess.Popen[bytes], str]) -> None:
    _, endpoint = s3_process
    store = _store(endpoint, timeout_s=1.0, max_attempts=2)
    assert store.read_bytes_or_none("runs/r/none.json") is None
    assert not store.exists("runs/r/none.json")


@pytest.mark.fault_matrix
def test_uploads_left_by_a_killed_writer_are_aborted_on_resume(s3_process: tuple[subprocess.Popen[bytes], str]) -> None:
    _, endpoint = s3_process
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for key in ("root/runs/r1/verify/part-00000.parquet", "root/runs/r1/dialogues/part-00001.parquet", "root/runs/r2/x.parquet"):
        client.create_multipart_upload(Bucket="faults", Key=key)
    store = _store(endpoint)
    assert store.abort_uploads("runs/r1/") == 2
    assert [u["Key"] for u in _uploads(endpoint)] == ["root/runs/r2/x.parquet"]
