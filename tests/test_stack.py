"""The production stack as CI can run it on one machine: a Prefect server of its own (on Postgres
where it is installed), the deployments of deploy/prefect.yaml run by a process worker, a Ray
cluster of two nodes, moto's S3 server as the storage root and the simulator served as an
OpenAI-compatible endpoint, each its own process, connected as docker-compose.yml connects them.

One scenario: a nightly run, run by the worker from a folder of its own through the deployments'
pull step (no image), with the deployment's own settings, loses its endpoint after preflight and
fails with one message, its failed shards one WARNING line each in the Prefect API's log and on the
Ray workers' stderr (no traceback); the endpoint recovers and the `rerun` deployment completes it on
both nodes, everything in S3; `toolfactory stats` reads it from another folder, with nothing
skipped and the run's first start; its dataset is that of a clean run of the same config, record
for record, curation annotations included; and a file of it damaged afterwards gets advice that
works from anywhere. The clean run is made in the test's own process (its Ray and Prefect API,
against the stack's endpoint and bucket): a third deployment run would add a process and a Ray
job on both nodes, and nothing the first two do not show. What the runs do leave nothing in the
checkout, whatever it held before (`make demo` writes there).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO, http, small_run_overrides
from stack_services import BIN, Database, RayCluster, prefect_database, prefect_server, process_worker, ray_cluster, simulator

pytestmark = [pytest.mark.e2e, pytest.mark.fault_matrix]

BUCKET = "toolfactory"
API_KEY = "sk-stack-test-key-never-written-7f3a9c"  # found nowhere in storage or in the worker's log
SEED = 7
RUN_TIMEOUT_S = 600


@dataclass
class Stack:
    database: Database
    api: str
    s3_endpoint: str
    simulator: str  # root URL; the API is under /v1
    worker_log: Path
    worker_dir: Path
    folder: Path
    ray: RayCluster
    started_s: float
    timings: dict[str, float] = field(default_factory=dict)

    def s3(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.s3_endpoint, region_name="us-east-1")

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def read(self, key: str) -> bytes:
        return self.s3().get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[no-any-return]


def _simulator_flags() -> list[str]:
    """The quick run's simulator settings, which a run's own simulator would take from its config
    (conftest.small_run_overrides): served apart, it is given them as docker-compose.yml does."""
    return [arg for override in small_run_overrides("unused") if override.startswith("llm.simulator.")
            for arg in ("--set", override)]


@pytest.fixture(scope="module")
def stack(s3_server: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    started = time.perf_counter()
    folder = tmp_path_factory.mktemp("stack")
    # Every process sees this checkout (PYTHONPATH as the session has it) and the S3 credentials
    # (conftest put them in the environment), as every container of docker-compose.yml does.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLFACTORY_", "PREFECT_", "RAY_ADDRESS"))}
    env.update(RAY_AUTH_MODE="disabled", PREFECT_SERVER_ANALYTICS_ENABLED="false", OPENAI_API_KEY=API_KEY,
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    up: dict[str, float] = {}

    def timed(service: str, since: float) -> None:
        up[service] = round(time.perf_counter() - since, 1)

    with ExitStack() as services:
        since = time.perf_counter()
        database = services.enter_context(prefect_database(folder))
        timed("database", since)
        since = time.perf_counter()
        api = services.enter_context(prefect_server(folder, database, env))
        timed("prefect server", since)
        since = time.perf_counter()
        client_env = {**env, "PREFECT_API_URL": api}
        subprocess.run([BIN / "prefect", "work-pool", "create", "toolfactory", "--type", "process", "--overwrite"],
                       env=client_env, cwd=REPO, check=True, capture_output=True, timeout=120)
        deployed = subprocess.run([BIN / "prefect", "--no-prompt", "deploy", "--prefect-file", "deploy/prefect.yaml", "--all"],
                                  env=client_env, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-2000:]
        timed("deploy", since)
        since = time.perf_counter()
        cluster = services.enter_context(ray_cluster(folder, env))
        timed("ray cluster", since)
        since = time.perf_counter()
        sim = services.enter_context(simulator(folder, env, _simulator_flags()))
        since = time.perf_counter()
        worker_dir = folder / "worker"
        worker_dir.mkdir()
        worker_log = worker_dir / "worker.log"
        services.enter_context(process_worker(worker_dir, worker_log, {
            **client_env,
            # What docker-compose.yml gives its prefect-worker, pointed at this machine's services.
            "TOOLFACTORY_HOME": str(REPO),
            "TOOLFACTORY_STORAGE__ENDPOINT_URL": s3_server["endpoint"],
            "TOOLFACTORY_LLM__PROVIDER": "openai-compatible",
            "TOOLFACTORY_LLM__BASE_URL": f"{sim}/v1",
            "RAY_ADDRESS": cluster.address,
            # The stats cache of an S3 root lives in the user's cache folder: one of the test's own.
            "XDG_CACHE_HOME": str(folder / "worker-cache"),
        }))
        timed("worker", since)
        stack = Stack(database, api, s3_server["endpoint"], sim, worker_log, worker_dir, folder, cluster,
                      started_s=time.perf_counter() - started)
        print(f"\nstack: Prefect server on {database.kind} ({database.url.split('://')[0]}), started in "
              f"{stack.started_s:.1f} s (" + ", ".join(f"{name} {s:.1f} s" for name, s in up.items()) + ")")
        yield stack


def _run(stack: Stack, deployment: str, parameters: dict[str, Any]) -> Any:
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: stack.api}):
        return run_deployment(deployment, parameters=parameters, timeout=RUN_TIMEOUT_S, poll_interval=1)


def _run_id(flow_run: Any) -> str:
    assert flow_run.name.startswith("generate-"), flow_run.name
    return str(flow_run.name.removeprefix("generate-"))


def _dataset(stack: Stack, prefix: str, run_id: str) -> dict[str, str]:
    """The run's curated records, id → canonical JSON."""
    records: dict[str, str] = {}
    for key in stack.keys(f"{prefix}/runs/{run_id}/curate/part-"):
        table = pq.read_table(io.BytesIO(stack.read(key)))
        for row in table.to_pylist():
            assert row["id"] not in records, f"record {row['id']} twice"
            records[row["id"]] = row["record"]
    return records


def _executed_calls(record: str) -> list[tuple[str, str]]:
    """The (source, function) of each call a record's dialogue sent to a real tool."""
    execution = json.loads(record).get("generation", {}).get("execution") or {}
    return [(str(call.get("source")), str(call.get("name"))) for call in execution.get("calls") or []]


# The curate annotations of a record that depend on the whole dataset: the complexity level is
# its rank among the dataset's complexities, the diversity subsets are drawn from every record's
# clusters. Its complexity and its clusters are its own (the pool's centroids, fitted once).
DATASET_RELATIVE = ("complexity_level", "diversity")


def _comparable(record: str, whole_curation: bool) -> Any:
    """A record as compared across two datasets: with its own curate annotations, and those
    relative to the whole dataset only if `whole_curation`."""
    fields = json.loads(record)
    if not whole_curation:
        fields["curation"] = {key: value for key, value in fields["curation"].items() if key not in DATASET_RELATIVE}
    return fields


def _measured(record: str) -> tuple[Any, Any]:
    """What the dataset-relative annotations of every record depend on, of one record besides its
    id: its complexity and the clusters of the functions it used."""
    curation = json.loads(record)["curation"]
    return curation["complexity"], curation["clusters"]


def _checkout() -> dict[str, tuple[int, int]]:
    """What the checkout holds of a run's files: the local storage root `make demo` writes and the
    stats files, path -> (size, time of last change)."""
    paths = [*(REPO / "toolfactory-data").rglob("*"), *REPO.glob("*.duckdb*")]
    return {str(p.relative_to(REPO)): (p.stat().st_size, p.stat().st_mtime_ns) for p in paths if p.is_file()}


def _flow_run_logs(stack: Stack, flow_run_id: Any) -> list[Any]:
    """Every log record the stack's Prefect API holds of a flow run, of its sub-flows and of their
    task runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId, LogFilter, LogFilterFlowRunId
    from prefect.client.schemas.sorting import LogSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: stack.api}), get_client(sync_client=True) as client:
        subflows = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))
        ids = [flow_run_id, *(subflow.id for subflow in subflows)]
        found: list[Any] = []
        while page := client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)), limit=200, offset=len(found),
                                       sort=LogSort.TIMESTAMP_ASC):
            found += page
    assert len(subflows) > 1, subflows  # the stage flows, whose task runs ran on Ray
    return found


def _moment(value: Any) -> datetime:
    """A time as the stats or the Prefect client give it, comparable (naive times are UTC)."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _nodes(stack: Stack, prefix: str, run_id: str) -> Counter[str]:
    """Shards per Ray node, from the metrics sidecars the stages' shards committed (not those of
    the run's stored inputs, which planning writes on the driver)."""
    sidecars = [json.loads(stack.read(key)) for key in stack.keys(f"{prefix}/runs/{run_id}/") if "/_metrics/" in key]
    return Counter(metrics.get("node", "none") for metrics in sidecars if "attempt_id" in metrics)


def _timed(stack: Stack, step: str, started: float) -> None:
    stack.timings[step] = round(time.perf_counter() - started, 1)


def test_the_production_stack_runs_fails_recovers_and_reports(stack: Stack, ray_cluster: None, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = _checkout()  # whatever the user made here before (`make demo`): the runs change none of it
    root = f"{int(time.time())}"  # a fresh prefix per test session: pools start empty
    clean, broken = f"{root}/clean", f"{root}/broken"
    deployments = yaml.safe_load((REPO / "deploy" / "prefect.yaml").read_text())["deployments"]
    [nightly] = [d for d in deployments if d["name"] == "nightly"]

    def overrides(prefix: str) -> list[str]:
        # The same config and seed for both runs: the plan and every request are the same.
        return [f"run.seed={SEED}", *small_run_overrides(f"s3://{BUCKET}/{prefix}", **{
            "tools.max_tools": 4, "tools.tools_per_shard": 2, "llm.max_retries": 0, "orchestration.task_retries": 0})]

    # 1. A nightly run, run by the worker with the deployment's settings (`run.fan_in: proceed`
    # among them; the test's own come after them, and win), loses its endpoint once it has passed
    # preflight (its manifest is in S3) and fails with one message.
    def break_endpoint_once_planned() -> None:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not [k for k in stack.keys(f"{broken}/runs/") if k.endswith("/manifest.json")] and time.monotonic() < deadline:
            time.sleep(0.1)
        http.post(f"{stack.simulator}/simulator/settings", json={"rate_500": 1.0}).raise_for_status()

    breaker = threading.Thread(target=break_endpoint_once_planned, daemon=True)
    breaker.start()
    started = time.perf_counter()
    failed = _run(stack, "generate/nightly", {"overrides": [*nightly["parameters"]["overrides"], *overrides(broken)]})
    _timed(stack, "failing nightly", started)
    breaker.join(10)
    broken_id = _run_id(failed)
    worker_log = stack.worker_log.read_text()
    assert failed.state is not None and failed.state.is_failed(), worker_log[-3000:]
    message = failed.state.message or ""
    assert "shard" in message and "The server had an error" in message, message
    assert f"toolfactory rerun {broken_id}" in message, message
    assert "Traceback" not in worker_log and "unexpected exception" not in worker_log, worker_log[-3000:]
    # The worker runs from a folder of its own, with no image: the deployments' pull step finds
    # the checkout through the worker's TOOLFACTORY_HOME.
    assert "set_working_directory' completed successfully" in worker_log, worker_log[-3000:]
    [night_record] = [json.loads(stack.read(key)) for key in stack.keys(f"{broken}/runs/{broken_id}/run.json")]
    assert night_record["config"]["run"]["fan_in"] == "proceed"  # the deployment's setting

    # 2. The endpoint recovers; the rerun deployment completes the run, its shards spread over
    # both nodes, everything in S3.
    http.post(f"{stack.simulator}/simulator/settings", json={"rate_500": 0}).raise_for_status()
    started = time.perf_counter()
    rerun = _run(stack, "rerun/rerun", {"run_id": broken_id, "overrides": [f"storage.root=s3://{BUCKET}/{broken}"]})
    _timed(stack, "rerun", started)
    assert rerun.state is not None and rerun.state.is_completed(), stack.worker_log.read_text()[-3000:]

    # The night's failed shards, an expected outcome recorded with its reason, are one WARNING line
    # each: in the Prefect API's log (the task runs' and the flows'), and on the stderr of the Ray
    # workers of both nodes (where Prefect's console handler writes the task runs' lines).
    logs = _flow_run_logs(stack, failed.id)
    assert not [log.message for log in logs if log.level >= 40 and "Traceback" in log.message]
    shards = [log for log in logs if log.task_run_id is not None and "ShardIncomplete" in log.message]
    assert shards and {log.level for log in shards} == {30}, [(log.level, log.message[:200]) for log in shards]
    workers = {log: log.read_text(errors="replace") for log in stack.ray.worker_logs()}
    assert any("ShardIncomplete" in text for text in workers.values()), "no shard line on the workers' stderr"
    troubled = [f"{log}:\n{text[-3000:]}" for log, text in workers.items() if "Traceback" in text or "| ERROR" in text]
    assert not troubled, troubled[0]
    nodes = _nodes(stack, broken, broken_id)
    assert len(nodes) == 2 and "none" not in nodes, nodes
    stored = stack.keys(f"{broken}/")
    for key in ("manifest.json", "run.json", "curate/part-00000.parquet", "report/index.html"):
        assert f"{broken}/runs/{broken_id}/{key}" in stored, key
    assert any(key.startswith(f"{broken}/llm-cache/") for key in stored)
    # The runs left nothing in the worker's folder.
    assert [p.name for p in stack.worker_dir.iterdir()] == ["worker.log"]

    # 3. Its stats, from a folder that has never seen the run: only the storage settings. Every
    # file of the root is read (none skipped), and the run started with the night, not the re-run.
    elsewhere = stack.folder / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLFACTORY_")}
    storage = ["--set", f"storage.root=s3://{BUCKET}/{broken}", "--set", f"storage.endpoint_url={stack.s3_endpoint}"]

    def stats_elsewhere() -> subprocess.CompletedProcess[str]:
        return subprocess.run([BIN / "toolfactory", "stats", broken_id, "--json", *storage], cwd=elsewhere,
                              env={**env, "XDG_CACHE_HOME": str(elsewhere / "cache")}, capture_output=True, text=True, timeout=300)

    started = time.perf_counter()
    stats = stats_elsewhere()
    _timed(stack, "stats elsewhere", started)
    assert stats.returncode == 0, stats.stderr[-3000:]
    summary = json.loads(stats.stdout)
    assert summary["run_id"] == broken_id and summary["status"] == "completed", summary
    assert summary["problems"] == [] and "skipped:" not in stats.stderr, stats.stderr[-3000:]
    assert failed.start_time is not None and rerun.start_time is not None
    first_start = _moment(summary["started_at"])
    # The stats keep times to the second; the flow runs' start, to the microsecond.
    assert _moment(failed.start_time) - timedelta(seconds=1) <= first_start < _moment(rerun.start_time), \
        (summary["started_at"], failed.start_time, rerun.start_time)

    # 4. A clean run of the same config against the same endpoint and bucket, made here (this
    # process's Ray and Prefect API: the cluster's part is above), as the worker would make it:
    # the nightly deployment's config file, its endpoint and storage from the environment the
    # worker has.
    from flows.execute import summary_of
    from flows.generate import generate

    config_path = nightly["parameters"]["config_path"]

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(stack.folder / "reference-cache"))  # the stats cache of an S3 root
    started = time.perf_counter()
    reference = summary_of(generate(config_path=str(REPO / config_path), overrides=[
        *overrides(clean), "llm.provider=openai-compatible", f"llm.base_url={stack.simulator}/v1",
        f"storage.endpoint_url={stack.s3_endpoint}"], return_state=True))
    _timed(stack, "clean run", started)
    assert reference["status"] == "completed", reference
    clean_id = reference["run_id"]

    # 5. The failed-then-rerun run's dataset is the clean run's: same ids, same records, same
    # curation annotations. A dialogue that ran a real tool is the exception where its shard was
    # made again: mcp-server-time answers with the time of the call, so the same first call gets
    # another result, what follows it is asked anew, and the judges may then decide otherwise
    # about it. Such a dialogue is in either dataset or both; where in both, it made the same first
    # call. Every other record has the same curation: its own complexity and clusters always; its
    # complexity level and diversity subsets, which are relative to the whole dataset, where the
    # two datasets hold the same records and those dialogues measured the same in both (then
    # theirs are the same too).
    clean_records, rerun_records = _dataset(stack, clean, clean_id), _dataset(stack, broken, broken_id)
    replayed = {key for records in (clean_records, rerun_records) for key, record in records.items() if _executed_calls(record)}
    assert clean_records.keys() - replayed
    same = clean_records.keys() == rerun_records.keys() and all(
        _measured(clean_records[key]) == _measured(rerun_records[key]) for key in replayed)
    assert {key: _comparable(record, same) for key, record in rerun_records.items() if key not in replayed} == \
        {key: _comparable(record, same) for key, record in clean_records.items() if key not in replayed}
    in_both = replayed & clean_records.keys() & rerun_records.keys()
    assert {key: _executed_calls(rerun_records[key])[:1] for key in in_both} == {key: _executed_calls(clean_records[key])[:1] for key in in_both}
    if same:
        assert {key: json.loads(rerun_records[key])["curation"] for key in replayed} == \
            {key: json.loads(clean_records[key])["curation"] for key in replayed}

    # 6. A dataset part damaged after its commit: the stats, from anywhere, name it and give the
    # commands that list and rebuild it, with the storage settings that find the run.
    part = f"{broken}/runs/{broken_id}/curate/part-00000.parquet"
    stack.s3().put_object(Bucket=BUCKET, Key=part, Body=stack.read(part)[:-10])
    damaged = stats_elsewhere()
    assert damaged.returncode == 0, damaged.stderr[-3000:]
    assert json.loads(damaged.stdout)["damaged"], damaged.stdout[-3000:]
    [advice] = [line for line in damaged.stderr.splitlines() if "damaged file(s)" in line]
    assert f"toolfactory rerun {broken_id}" in advice and f"--set storage.root=s3://{BUCKET}/{broken}" in advice, advice
    assert f"storage.endpoint_url={stack.s3_endpoint}" in advice, advice

    # Nothing of the runs in the checkout: what it held before is as it was.
    assert _checkout() == checkout

    for key in stack.keys(f"{root}/"):
        assert API_KEY.encode() not in stack.read(key), key
    assert API_KEY not in stack.worker_log.read_text()
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in stack.timings.items())
    per_node = ", ".join(f"{node[:8]}: {count}" for node, count in sorted(nodes.items()))
    print(f"stack benchmark: database {stack.database.kind}; services up {stack.started_s:.1f} s; {steps}; "
          f"shards per node ({sum(nodes.values())} shards) {per_node}; dataset of {len(rerun_records)} records, "
          f"{len(replayed)} ran a real tool; dataset-relative curation " + ("compared" if same else "not comparable"))
