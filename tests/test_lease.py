"""One run at a time on a storage root, on a local folder and on a real S3 server (moto's)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from conftest import REPO
from toolfactory.run import lease
from toolfactory.config import StorageConfig
from toolfactory.run.lease import LEASE, RootInUse, root_lease
from toolfactory.storage import ObjectStore


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return ObjectStore.open(StorageConfig(root=str(tmp_path / "root")))
    s3 = request.getfixturevalue("s3_server")
    return ObjectStore.open(StorageConfig(root=f"s3://{s3['bucket']}/{tmp_path.name}", endpoint_url=s3["endpoint"], region="us-east-1"))


@pytest.mark.fault_matrix
def test_a_second_run_fails_at_once_naming_the_holder(store: ObjectStore) -> None:
    with root_lease(store, "run-a", wait=True, wait_s=0):
        with pytest.raises(RootInUse) as raised:
            with root_lease(store, "run-b", wait=False, wait_s=0):
                pass
    assert "in use by run run-a" in str(raised.value) and "run run-b did not start" in str(raised.value)
    assert store.url in str(raised.value)


@pytest.mark.fault_matrix
def test_a_waiting_run_starts_when_the_holder_ends(store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "POLL_S", 0.1)
    order = []
    first = root_lease(store, "run-a", wait=True, wait_s=0)
    first.__enter__()
    with pytest.raises(RootInUse, match="after waiting 1 s"):
        with root_lease(store, "run-b", wait=True, wait_s=1):
            pass
    first.__exit__(None, None, None)
    with root_lease(store, "run-b", wait=True, wait_s=5):
        order.append("b")
    assert order == ["b"]


@pytest.mark.fault_matrix
def test_a_killed_holders_local_lease_is_free_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom toolfactory.config import StorageConfig\nfrom toolfactory.run.lease import root_lease\n"
         "from toolfactory.storage import ObjectStore\n"
         f"with root_lease(ObjectStore.open(StorageConfig(root={str(root)!r})), 'run-a', True, 0):\n"
         "    print('held', flush=True); time.sleep(300)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    store = ObjectStore.open(StorageConfig(root=str(root)))
    with pytest.raises(RootInUse, match="run-a"):
        with root_lease(store, "run-b", wait=False, wait_s=0):
            pass
    holder.kill()
    holder.wait()
    with root_lease(store, "run-b", wait=False, wait_s=0):
        pass


@pytest.mark.fault_matrix
def test_an_s3_lease_not_renewed_for_its_ttl_is_taken_over(s3_server: dict[str, str], tmp_path: Path) -> None:
    store = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"], region="us-east-1"))
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    key = f"{tmp_path.name}/{LEASE}"
    stale = {"run_id": "run-dead", "host": "gone", "since": time.time() - 1000, "renewed": time.time() - lease.TTL_S - 5}
    client.put_object(Bucket=s3_server["bucket"], Key=key, Body=json.dumps(stale).encode())
    with root_lease(store, "run-b", wait=False, wait_s=0):
        held = json.loads(client.get_object(Bucket=s3_server["bucket"], Key=key)["Body"].read())
        assert held["run_id"] == "run-b"
    assert "Contents" not in client.list_objects_v2(Bucket=s3_server["bucket"], Prefix=key)  # released


@pytest.mark.fault_matrix
def test_an_s3_lease_is_renewed_while_held(s3_server: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "RENEW_S", 0.2)
    store = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"], region="us-east-1"))
    client = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    key = f"{tmp_path.name}/{LEASE}"
    with root_lease(store, "run-a", wait=False, wait_s=0):
        first = json.loads(client.get_object(Bucket=s3_server["bucket"], Key=key)["Body"].read())["renewed"]
        time.sleep(1.0)
        later = json.loads(client.get_object(Bucket=s3_server["bucket"], Key=key)["Body"].read())["renewed"]
    assert later > first


def test_a_waiting_run_says_who_holds_the_root_then_again_while_it_waits(store: ObjectStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "POLL_S", 0.05)
    monkeypatch.setattr(lease, "REPORT_S", 0.5)
    lines: list[str] = []
    with root_lease(store, "run-a", wait=False, wait_s=0):
        with pytest.raises(RootInUse):
            with root_lease(store, "run-b", wait=True, wait_s=1.2, report=lines.append):
                pass
    assert 2 <= len(lines) <= 3  # at the start, then once per REPORT_S
    assert lines[0].startswith(f"run run-b waits for storage root {store.url}, in use by run run-a (on {socket.gethostname()} since ")
    assert lines[0].endswith("waited 0 s of 1 s (run.root_wait_s)") and all("\n" not in line for line in lines)


def test_a_run_that_gets_the_root_at_once_reports_nothing(store: ObjectStore) -> None:
    lines: list[str] = []
    with root_lease(store, "run-a", wait=True, wait_s=5, report=lines.append):
        pass
    assert lines == []
