"""The local Ray of a run: started even where a dead cluster is recorded; its workers reach the
run's Prefect API and stay up between stages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


from flows.runtime import shard_slots
from toolfactory.config import load_config

REPO = Path(__file__).resolve().parents[1]

# Two rounds of four quarter-CPU shards on one Ray CPU (four slots), 2.5 s apart: longer than Ray
# lets an idle worker beyond its soft limit live (1 s).
SCRIPT = """
import json, os, sys, time, ray
from prefect.settings import PREFECT_API_URL, temporary_settings
from flows.runtime import ray_session
from toolfactory.config import load_config

@ray.remote(num_cpus=0.25)
def shard():
    time.sleep(1.5)
    return os.getpid(), os.environ.get("PREFECT_API_URL")

config = load_config(None, ["orchestration.ray_num_cpus=1", "orchestration.shard_cpus=0.25"])
with temporary_settings({PREFECT_API_URL: sys.argv[1]}), ray_session(config):  # as a run's temporary server is set
    leaked = "PREFECT_API_URL" in os.environ
    first = ray.get([shard.remote() for _ in range(4)])
    time.sleep(2.5)
    second = ray.get([shard.remote() for _ in range(4)])
    address = ray.get_runtime_context().gcs_address
print(json.dumps({"first": first, "second": second, "leaked": leaked, "address": address}))
"""

def test_shard_slots_are_the_cpus_over_the_cpus_a_shard_reserves() -> None:
    assert shard_slots(load_config(None, ["orchestration.ray_num_cpus=2", "orchestration.shard_cpus=0.25"])) == 8
    assert shard_slots(load_config(None, ["orchestration.ray_num_cpus=3", "orchestration.shard_cpus=2"])) == 2
    assert shard_slots(load_config(None, ["orchestration.ray_num_cpus=1", "orchestration.shard_cpus=1"])) == 1


def test_a_local_ray_ignores_a_stale_cluster_record_keeps_a_worker_per_shard_slot_and_gives_them_the_prefect_api(
    prefect_api: str
) -> None:
    with tempfile.TemporaryDirectory(prefix="tfray", dir="/tmp") as ray_tmp:  # Ray's socket paths must be short
        # `ray start` records its cluster in <tmp>/ray/ray_current_cluster: a dead one must not
        # capture a local run (connecting to it would hang).
        (Path(ray_tmp) / "ray").mkdir()
        (Path(ray_tmp) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9")  # nothing listens there
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": ray_tmp}
        for name in ("PREFECT_API_URL", "RAY_ADDRESS"):  # the API reaches the workers from the driver's settings
            env.pop(name, None)
        done = subprocess.run([sys.executable, "-c", SCRIPT, prefect_api], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = json.loads(done.stdout.strip().splitlines()[-1])
    assert rounds["address"] != "127.0.0.1:9"
    assert {url.rstrip("/") for _, url in rounds["first"] + rounds["second"]} == {prefect_api.rstrip("/")}
    assert not rounds["leaked"]  # the driver's own environment is as it was
    first, second = {pid for pid, _ in rounds["first"]}, {pid for pid, _ in rounds["second"]}
    assert len(first) >= 2  # Ray starts one worker at a time per CPU: the first may take two shards
    # No worker was stopped between the rounds: every first-round worker takes a shard of the second
    # (which needs all four slots at once). Ray's default keeps one idle worker per CPU (here one)
    # and would have killed the others after a second. A fourth worker may be new when the first
    # round ran on three.
    assert first <= second
