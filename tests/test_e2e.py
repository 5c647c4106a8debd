"""Whole runs on the real parts: Prefect (test harness), a local Ray, the simulator over HTTP,
local storage and moto's S3 server, a DuckDB file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import boto3
import duckdb
import pytest

from conftest import break_endpoint_once_planned, http, small_run_overrides
from toolfactory.config import load_config
from toolfactory.models import Dialogue
from toolfactory.storage.shards import read_records, read_rejected
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore

pytestmark = pytest.mark.e2e
STAGES = ["tools", "pool", "tasks", "dialogues", "verify", "measure", "select", "curate"]  # domains: off without synthesis
SHARDS = {"tools": 3, "pool": 1, "tasks": 3, "dialogues": 3, "verify": 3, "measure": 3, "select": 1, "curate": 3}


def stage_of(summary: dict, name: str) -> dict:
    return next(s for s in summary["stages"] if s["stage"] == name)
API_KEY = "sk-e2e-secret-never-stored-0123456789abcdef"
TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


@pytest.fixture
def runtime(prefect_api: str, ray_cluster: None, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    return prefect_api


def generate(overrides: list[str]) -> dict[str, Any]:
    from flows.execute import summary_of

    return summary_of(generate_state(overrides))  # a crashed flow raises its own error here


def generate_state(overrides: list[str]) -> Any:
    """The generate flow's final Prefect state (its data: the run's summary)."""
    from flows.generate import generate as generate_flow

    return generate_flow(config_path=None, overrides=overrides, return_state=True)


def all_bytes_under(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in root.rglob("*") if p.is_file()]


def part_files(root: Path, run_id: str) -> dict[str, tuple[bytes, int]]:
    """Every committed shard file of a run: content and modification time."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (root / "runs" / run_id).rglob("part-*.parquet")
    }


def test_local_run_writes_shards_manifest_stats_and_artifacts(runtime: str, tmp_path: Path, shared_data: Path) -> None:
    bad_tools = tmp_path / "bad_tools.json"
    bad_tools.write_text(json.dumps([
        {"type": "function", "function": {"name": "no_description", "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "broken_schema", "description": "x", "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}},
    ]))
    files = json.dumps([
        {"path": str(bad_tools), "format": "openai"},
        {"path": str(shared_data / "toolbench/instruction/G1_query.json"), "format": "toolbench"},
    ])
    root = tmp_path / "data"
    summary = generate(small_run_overrides(root, **{"tools.files": files, "tools.max_tools": 12, "tools.tools_per_shard": 4}))
    run_id = summary["run_id"]

    assert summary["status"] == "completed"
    assert [s["stage"] for s in summary["stages"]] == STAGES
    tools = stage_of(summary, "tools")
    assert tools["shards_total"] == 3 and tools["shards_failed"] == 0
    assert sum(s["items_out"] for s in summary["stages"][:1]) + tools["rejected"] == tools["items_in"]

    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    manifest = json.loads(store.read_bytes(f"runs/{run_id}/manifest.json"))
    assert manifest["config"]["tools"]["max_tools"] == 12
    assert {"prefect", "ray", "openai", "pyarrow", "duckdb"} <= set(manifest["versions"])
    assert {s: len(manifest["plan"][s]) for s in STAGES} == SHARDS and manifest["plan"]["domains"] == []

    accepted = [Dialogue.model_validate(r) for i in range(3) for r in read_records(store, f"runs/{run_id}/verify/part-{i:05d}.parquet")]
    assert accepted and all(errors(check(d)) == [] for d in accepted)
    assert len({d.id for d in accepted}) == len(accepted)
    verify = stage_of(summary, "verify")
    assert verify["items_out"] == len(accepted)
    rules, model = verify["layers"]["rules"], verify["layers"]["model"]
    assert (rules["in"], model["in"], model["passed"]) == (verify["items_in"], rules["passed"], len(accepted))
    # votes stop once the majority is decided: two passing votes of three keep an aspect
    assert all(len(d.judgements) == 5 and all(2 <= len(j.votes) <= 3 for j in d.judgements) for d in accepted)
    assert any(len(j.votes) == 2 for d in accepted for j in d.judgements)

    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        shard_rows = con.execute("SELECT stage, count(*), min(status), max(status) FROM shards WHERE run_id = ? GROUP BY stage", [run_id]).fetchall()
        calls = con.execute("SELECT sum(calls) FROM llm_usage WHERE run_id = ?", [run_id]).fetchone()[0]
    assert sorted(shard_rows) == sorted((s, SHARDS[s], "completed", "completed") for s in STAGES)
    assert calls == sum(s["llm_calls"] for s in summary["stages"]) > 0
    cost = summary["per_accepted"]  # what one dataset record cost, per stage and per recipe
    final = summary["stages"][-1]["items_out"]
    assert cost["accepted"] == final and cost["llm_calls"] == round(calls / final, 2)
    assert cost["by_stage"]["verify"]["llm_calls"] == round(stage_of(summary, "verify")["llm_calls"] / final, 2)
    assert sum(r["accepted"] for r in cost["by_recipe"].values()) == final

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        keys = ["toolfactory-stages", "toolfactory-status"]  # the same every run: Prefect versions them
        artifacts = [a for a in client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
                     if run_id in str(a.description) + str(a.data)]
        task_runs = {t.name: t for t in client.read_task_runs()}
        names = set(task_runs)
        flows = {f.name: f for f in client.read_flow_runs()}
        flow_names = set(flows)
    assert {a.key for a in artifacts} == set(keys)
    labels = {"toolfactory", "provider:simulator", "recipes:toolalpaca"}
    assert labels <= set(flows[f"generate-{run_id}"].tags) and labels <= set(flows[f"{run_id}/verify"].tags)
    # Shard task runs carry no tags: each tag would cost a concurrency-slot request to the server.
    assert [name for name, run in task_runs.items() if name.startswith(f"{run_id}/") and run.tags] == []
    assert flows[f"generate-{run_id}"].state.is_completed()
    table = next(a for a in artifacts if a.key.endswith("stages"))
    assert "pass rate" in str(table.data) and "dialogues" in str(table.data)
    assert {f"{run_id}/{stage}/part-00000" for stage in STAGES} <= names
    assert f"generate-{run_id}" in flow_names and f"{run_id}/verify" in flow_names
    report = root / "runs" / run_id / "report" / "index.html"
    assert report.exists() and "funnel.png" in report.read_text()
    status = next(a for a in artifacts if a.key.endswith("status"))
    assert str(report) in str(status.data)
    exported = root / "runs" / run_id / "export"
    lines = [line for split in ("train", "validation", "test") for line in (exported / "openai" / f"{split}.jsonl").read_text().splitlines()]
    curated = stage_of(summary, "curate")["items_out"]
    assert len(lines) == curated and (exported / "hf" / "README.md").exists() and "export (openai)" in str(status.data)


@pytest.fixture(scope="module")
def malformed_tools_run(prefect_api: str, ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One local run, done once for the tests that check different facts of it: its storage root
    and its summary. Its only tool file holds one good tool and two malformed ones."""
    folder = tmp_path_factory.mktemp("malformed-tools")
    bad_tools = folder / "tools.json"
    bad_tools.write_text(json.dumps([
        {"type": "function", "function": {"name": "ok", "description": "Find books by title.", "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}},
        {"type": "function", "function": {"name": "no_description", "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"description": "no name at all"}},
    ]))
    root = folder / "data"
    overrides = small_run_overrides(root, **{"tools.builtin_catalog": "false", "tools.files": json.dumps([{"path": str(bad_tools), "format": "openai"}])})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", API_KEY)  # in the environment of the run, as `runtime` sets it
        return root, generate(overrides)


def test_malformed_tools_are_rejected_with_reasons_and_counted(malformed_tools_run: tuple[Path, dict[str, Any]]) -> None:
    root, summary = malformed_tools_run
    tools = stage_of(summary, "tools")
    assert summary["status"] == "completed"
    assert (tools["items_out"], tools["rejected"]) == (1, 2)
    assert tools["rejections"] == {"tool_missing_description": 1, "tool_malformed": 1}
    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    rejected = read_rejected(store, f"runs/{summary['run_id']}/tools/rejected/part-00000.parquet")
    assert sorted(r["reasons"][0] for r in rejected) == ["tool_malformed", "tool_missing_description"]
    assert all(r["detail"] for r in rejected)


def test_s3_run_keeps_everything_in_the_bucket_and_no_secret_anywhere(runtime: str, tmp_path: Path, s3_server: dict[str, str]) -> None:
    prefix = f"nightly-{tmp_path.name}"
    overrides = small_run_overrides(f"s3://{s3_server['bucket']}/{prefix}", **{"tools.tools_per_shard": 4}) + [
        f"storage.endpoint_url={s3_server['endpoint']}",
        f"stats.path={tmp_path / 'stats.duckdb'}",
    ]
    summary = generate(overrides)
    run_id = summary["run_id"]
    assert summary["status"] == "completed"

    s3 = boto3.client("s3", endpoint_url=s3_server["endpoint"], region_name="us-east-1")
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="toolfactory", Prefix=prefix) for o in page.get("Contents", [])]
    run_prefix = f"{prefix}/runs/{run_id}/"
    for expected in ["manifest.json", "run.json", *(f"{s}/part-00000.parquet" for s in STAGES), "verify/rejected/part-00001.parquet"]:
        assert run_prefix + expected in keys
    # The stats live in the bucket: a cache made elsewhere from it alone says what the run's driver said.
    from toolfactory.stages import STAGE_NAMES
    from toolfactory.run.stats import StatsDB
    from toolfactory.run.stats_sync import sync_stats

    elsewhere = StatsDB(tmp_path / "elsewhere.duckdb")
    # Every sidecar is read; those of the run's stored inputs (sources) are no shard's: no problem.
    assert sync_stats(ObjectStore.open(load_config(None, overrides).storage), elsewhere, run_id).problems == ()
    assert elsewhere.run_summary(run_id, STAGE_NAMES) == StatsDB(tmp_path / "stats.duckdb").run_summary(run_id, STAGE_NAMES)
    assert any(k.startswith(f"{prefix}/llm-cache/") for k in keys)
    assert not any("/.tmp-" in k for k in keys)

    secrets = [API_KEY, s3_server["AWS_SECRET_ACCESS_KEY"], s3_server["AWS_ACCESS_KEY_ID"]]
    blobs = [s3.get_object(Bucket="toolfactory", Key=k)["Body"].read() for k in keys] + [(tmp_path / "stats.duckdb").read_bytes()]
    for secret in secrets:
        assert not any(secret.encode() in blob for blob in blobs), "a secret leaked into storage"


@pytest.mark.fault_matrix
def test_no_secret_in_local_storage_or_stats(malformed_tools_run: tuple[Path, dict[str, Any]]) -> None:
    root, summary = malformed_tools_run
    files = all_bytes_under(root)
    assert summary["status"] == "completed" and any(p.name == "manifest.json" for p, _ in files)
    assert any(p.name == "stats.duckdb" for p, _ in files)
    assert not any(API_KEY.encode() in blob for _, blob in files)


def test_stats_and_report_read_no_stored_input_as_a_shard(malformed_tools_run: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """The run's stored inputs (its sources) have sidecars of their own shape, written when it was
    planned: neither `stats` nor `report` takes them for a shard's metrics, or warns of them."""
    root, summary = malformed_tools_run
    run_id = summary["run_id"]
    assert list(root.glob(f"runs/{run_id}/sources/_metrics/part-*.json"))
    storage = ["--set", f"storage.root={root}"]
    # The driver's own cache, then caches made from storage alone (as on another machine).
    for cache in ([], ["--set", f"stats.path={tmp_path / 'elsewhere.duckdb'}"]):
        stats = subprocess.run([TOOLFACTORY, "stats", run_id, "--json", *storage, *cache], capture_output=True, text=True, timeout=120)
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["problems"] == [] and "skipped" not in stats.stderr, stats.stderr
    report = subprocess.run([TOOLFACTORY, "report", run_id, *storage, "--set", f"stats.path={tmp_path / 'for-report.duckdb'}"],
                            capture_output=True, text=True, timeout=180)
    assert report.returncode == 0, report.stderr
    assert "skipped" not in report.stderr and "report: " in report.stdout


def test_the_advice_for_damaged_files_carries_the_storage_settings(malformed_tools_run: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    import shutil

    run_id = malformed_tools_run[1]["run_id"]
    root = tmp_path / "copy"  # the module's run stays whole for the other tests
    shutil.copytree(malformed_tools_run[0], root)
    part = root / "runs" / run_id / "tasks" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:100])
    storage = ["--set", f"storage.root={root}"]
    stats = subprocess.run([TOOLFACTORY, "stats", run_id, *storage], capture_output=True, text=True, timeout=120)
    assert stats.returncode == 0, stats.stderr
    rerun = f"toolfactory rerun {run_id} --set storage.root={root}"
    assert (f"warning: run {run_id} has 1 damaged file(s) since its commit: `toolfactory check-run {run_id} --set storage.root={root}` "
            f"lists them, `{rerun}` builds them again") in stats.stderr
    check = subprocess.run([TOOLFACTORY, "check-run", run_id, *storage], capture_output=True, text=True, timeout=120)
    assert check.returncode == 1 and f"with those that read a damaged one: {rerun}" in check.stdout


@pytest.mark.fault_matrix
def test_rerun_completes_only_failed_shards_and_pays_only_for_missing_answers(runtime: str, tmp_path: Path) -> None:
    settings = SimulatorSettings(rate_500=0.25)
    with start_simulator(settings) as sim:
        def endpoint(root: Path) -> list[str]:
            return small_run_overrides(root, **{
                "llm.provider": "openai-compatible", "llm.base_url": sim.base_url,
                "llm.max_retries": 0, "orchestration.task_retries": 0, "tools.tools_per_shard": 4,
                "run.min_accepted": 0,  # a bare simulator's judges vote at random: shards are the point here
            })

        root = tmp_path / "data"
        from flows.execute import summary_of

        state = generate_state(endpoint(root))
        first = summary_of(state)
        run_id = first["run_id"]
        failed = [(s["stage"], f["shard"]) for s in first["stages"] for f in s["failed_shards"]]
        assert first["status"] == "failed" and failed
        # Prefect tells the truth: the run is Failed, with the shards and the command that finishes it.
        assert state.is_failed()
        assert f"toolfactory rerun {run_id} --set storage.root={root}" in state.message
        assert f"{failed[0][0]}/part-{failed[0][1]:05d}" in state.message
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(like_=f"{run_id}/")))
        stage_states = {f.name.split("/")[-1]: f.state for f in runs}
        for s in (s for s in first["stages"] if s["shards_total"]):  # every stage shows; with a failed or blocked shard, Failed
            assert stage_states[s["stage"]].is_failed() == bool(s["failed_shards"]), s["stage"]
        assert any(f["status"] == "failed" and "llm_server_error" in f["error"] for s in first["stages"] for f in s["failed_shards"])
        committed = part_files(root, run_id)
        paid_first = sum(s["llm_calls"] for s in first["stages"])

        # The endpoint recovers; the re-run uses the run's own config from its manifest.
        http.post(f"{sim.root_url}/simulator/settings", json={"rate_500": 0.0}).raise_for_status()
        http.post(f"{sim.root_url}/simulator/reset").raise_for_status()
        from flows.rerun import rerun

        # An operational setting is applied and recorded (the endpoint recovered: retries are back on).
        second = rerun(run_id=run_id, overrides=[f"storage.root={root}", "llm.max_retries=3"])  # completed: its summary
        manifest = json.loads((root / "runs" / run_id / "manifest.json").read_text())
        assert manifest["config"]["llm"]["max_retries"] == 3
        assert manifest["reruns"][0]["overrides"] == [f"storage.root={root}", "llm.max_retries=3"]
        sent_by_rerun = http.get(f"{sim.root_url}/simulator/stats").json()["chat_requests"]

        assert second["status"] == "completed" and second["run_id"] == run_id
        after = part_files(root, run_id)
        assert all(after[path] == committed[path] for path in committed)  # untouched: same bytes, same mtime
        assert len(after) > len(committed)

        # A clean run of the same config is the reference: every answer is paid for exactly once.
        reference = generate(endpoint(tmp_path / "reference"))
        paid_clean = sum(s["llm_calls"] for s in reference["stages"])
    paid_second = sum(s["llm_calls"] for s in second["stages"]) - paid_first
    assert sent_by_rerun == paid_second
    assert paid_first + paid_second == paid_clean
    assert sum(s["cache_hits"] for s in second["stages"]) > 0

    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    ids = [r["id"] for i in range(2) for r in read_records(store, f"runs/{run_id}/verify/part-{i:05d}.parquet")]
    rejected = [r["id"] for i in range(2) for r in read_rejected(store, f"runs/{run_id}/verify/rejected/part-{i:05d}.parquet")]
    assert len(set(ids)) == len(ids) and not set(ids) & set(rejected)
    assert len(ids) + len(rejected) == reference["stages"][2]["items_out"]


@pytest.mark.fault_matrix
def test_a_killed_run_is_finished_by_rerun_without_duplicates(
    runtime: str, ray_head: str, tmp_path: Path, toolfactory_here: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    root = tmp_path / "data"
    # The killed driver leaves the shared cluster to end its job.
    env = {**os.environ, "PREFECT_API_URL": runtime, "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": ray_head}
    overrides = small_run_overrides(root, **{"llm.simulator.latency_ms": 400, "tools.max_tools": 12, "tools.tools_per_shard": 3})
    args = [TOOLFACTORY, "run", *sum((["--set", o] for o in overrides), [])]
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not list(root.glob("runs/*/tasks/part-*.parquet")):
            assert process.poll() is None, process.stdout.read().decode()[-3000:] if process.stdout else ""
            assert time.monotonic() < deadline, "the run never committed a tasks shard"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # The run used the Ray cluster named by RAY_ADDRESS, and started none of its own.
    output = process.stdout.read().decode() if process.stdout else ""
    assert "Connecting to existing Ray cluster" in output and "Started a local Ray instance" not in output, output[-3000:]
    [run_dir] = list((root / "runs").iterdir())
    assert not (run_dir / "verify").exists() or len(list((run_dir / "verify").glob("part-*.parquet"))) < 4

    # The latency only had to keep the run busy until the kill: the re-run goes without it. (The
    # command line's `rerun` has tests of its own: tests/test_budget_e2e.py.)
    from flows.rerun import rerun

    finished = rerun(run_id=run_dir.name, overrides=[f"storage.root={root}", "llm.simulator.latency_ms=0"])
    assert finished["status"] == "completed" and finished["run_id"] == run_dir.name
    assert not list(run_dir.rglob(".tmp-*"))

    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    dialogues = [r["id"] for i in range(4) for r in read_records(store, f"runs/{run_dir.name}/dialogues/part-{i:05d}.parquet")]
    tasks = [r["id"] for i in range(4) for r in read_records(store, f"runs/{run_dir.name}/tasks/part-{i:05d}.parquet")]
    assert len(dialogues) == len(set(dialogues)) == len(tasks) == 24

    stats = toolfactory_here("stats", run_dir.name, "--json", "--set", f"storage.root={root}")
    assert stats.returncode == 0, stats.stderr
    summary = json.loads(stats.stdout)
    assert summary["run_id"] == run_dir.name and summary["status"] == "completed"
    for stage in summary["stages"]:
        assert {"stage", "shards_total", "shards_failed", "items_in", "items_out", "pass_rate", "llm_calls", "cache_hits", "rejections"} <= set(stage)
        assert stage["shards_total"] == (1 if stage["stage"] in ("pool", "select") else 4) and stage["shards_failed"] == 0


@pytest.mark.fault_matrix
def test_invalid_config_fails_before_any_work(tmp_path: Path) -> None:
    root = tmp_path / "data"
    result = subprocess.run(
        [TOOLFACTORY, "run", "--set", f"storage.root={root}", "--set", "llm.provider=gpt4"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "llm.provider" in result.stderr and "'simulator' or 'openai-compatible'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not root.exists()


@pytest.mark.fault_matrix
def test_transient_failures_are_retried_by_the_task_until_the_shard_completes(runtime: str, tmp_path: Path) -> None:
    with start_simulator(SimulatorSettings(rate_500=0.15)) as sim:
        root = tmp_path / "data"
        summary = generate(small_run_overrides(root, **{
            "llm.provider": "openai-compatible", "llm.base_url": sim.base_url,
            "llm.max_retries": 0, "orchestration.task_retries": 10,
            "run.min_accepted": 0,  # a bare simulator's judges vote at random: shards are the point here
        }))
    assert summary["status"] == "completed"
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        attempts = dict(con.execute("SELECT stage || '/' || shard, attempts FROM shards WHERE run_id = ?", [summary["run_id"]]).fetchall())
        completed = con.execute("SELECT count(*) FROM shard_attempts WHERE run_id = ? AND outcome = 'completed'", [summary["run_id"]]).fetchone()[0]
    assert max(attempts.values()) > 1  # some shard needed a retry…
    assert completed == len(attempts)  # …and each shard completed exactly once


def test_api_key_from_a_prefect_secret_block(runtime: str, tmp_path: Path) -> None:
    from prefect.blocks.system import Secret

    from toolfactory.llm.endpoint import resolve_api_key

    Secret(value="sk-from-block-0123456789").save("toolfactory-llm-key", overwrite=True)
    config = load_config(None, ["llm.api_key_secret_block=toolfactory-llm-key"], environ={})
    assert resolve_api_key(config.llm) == "sk-from-block-0123456789"
    missing = load_config(None, ["llm.api_key_secret_block=no-such-block"], environ={})
    with pytest.raises(Exception, match="no-such-block"):
        resolve_api_key(missing.llm)


@pytest.mark.fault_matrix
def test_an_endpoint_that_fails_after_preflight_fails_its_shards_with_its_own_words_after_every_retry(runtime: str, tmp_path: Path) -> None:
    """A shard's error crosses from the Ray worker intact: its class and the endpoint's words reach
    the stats and the run's message, and the task's retries run as for any transient error."""
    with start_simulator(SimulatorSettings()) as sim:
        root = tmp_path / "data"
        breaker = break_endpoint_once_planned(lambda: bool(list(root.glob("runs/*/manifest.json"))), sim.root_url)
        from flows.execute import summary_of

        state = generate_state(small_run_overrides(root, **{
            "llm.provider": "openai-compatible", "llm.base_url": sim.base_url,
            "llm.max_retries": 0, "orchestration.task_retries": 1,
        }))
        breaker.join()
    summary = summary_of(state)
    assert state.is_failed() and summary["status"] == "failed"
    failures = [(s["stage"], f) for s in summary["stages"] for f in s["failed_shards"] if f["status"] == "failed"]
    assert failures
    words = "The server had an error while processing your request"
    for _stage, failure in failures:
        assert words in failure["error"] and "RaySystemError" not in failure["error"], failure
    assert words in (state.message or "") and "First error: " in (state.message or "")
    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        attempts = con.execute("SELECT DISTINCT attempts FROM shards WHERE run_id = ? AND status = 'failed'", [summary["run_id"]]).fetchall()
    assert attempts == [(2,)]  # the first try and orchestration.task_retries: 1
