"""Executing a planned run: every stage's shards that are not done yet, as Prefect tasks on Ray.

Shared by the generate flow (a new run) and the rerun flow (an existing one): a shard whose
output is committed is never run again, a shard whose input is missing is recorded as blocked,
and every other shard is submitted, one task per (stage, shard). Stages run in order, except
that a chain of one-to-one stages runs at once, shard i of each starting when its input shard
commits (:mod:`flows.overlap`); within a stage all shards run in parallel on Ray. Metrics go to
DuckDB from the driver only: what it records on the way (stats, run record, the manifest's growth,
damaged files, the pool) is kept by :mod:`toolfactory.run.bookkeeping`, which this flow calls.
"""

from __future__ import annotations

from typing import Any, Callable

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext, TagsContext
from prefect.exceptions import ObjectNotFound
from prefect.states import Failed, State
from prefect_ray.context import remote_options

from flows.full_disk import full_disk_state
from flows.leftovers import take_over
from flows.overlap import Group, Settled, StageFlows, StageWork, current_link
from flows.progress import StageProgress, shared_display
from flows.runtime import ray_session, run_ledger, session_hosts
from flows.task_runner import KeptContextRayTaskRunner
from tasks.shard import configured
from toolfactory.config import Config
from toolfactory.errors import EndpointRefused, RunFailed
from toolfactory.export import ExportOptions, OutputDir, SplitSpec, export_run
from toolfactory.report import build_report
from toolfactory.run.bookkeeping import RunBook, ShardBook
from toolfactory.run.execution import ShardJob
from toolfactory.run.fan_in import chains, follows
from toolfactory.run.lifetime import Driver
from toolfactory.run.manifest import Manifest
from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.outcome import failure_message, full_disk_line, rerun_command
from toolfactory.run.stats import StatsDB
from toolfactory.run.summary import RunSummary
from toolfactory.stages import DATASET_STAGE, STAGE_NAMES, ShardSpec
from toolfactory.storage import ObjectStore, disk_full


def execute_run(manifest: Manifest, store: ObjectStore, base_url: str | None, checksums: bool = False) -> RunSummary:
    """Run what is left of `manifest`'s run, sending LLM requests to `base_url` (None: the
    configured `llm.base_url`); the run's summary. Committed
    shards found damaged (sizes; with `checksums`, every file's checksum too) are built again,
    with every shard that read them. What the run records on the way is kept by its
    :class:`~toolfactory.run.bookkeeping.RunBook`."""
    book = RunBook(manifest, store, get_run_logger())
    book.start(checksums)
    config, run_id = book.config, book.run_id
    stopped: str | None = None  # why the run stopped early: an endpoint's repeated refusals
    stop: str | None = None  # the budget is spent
    driver = Driver()
    take_over(run_id, FlowRunContext.get().flow_run, driver, get_run_logger())  # type: ignore[union-attr]
    with (ray_session(config, warm=book.widest_stage()), session_hosts(config, run_id),
          run_ledger(config, run_id, book.stats) as ledger,
          shared_display() as display, StageFlows() as flows):
        limits = ledger.ref if ledger is not None else None
        for stages in chains(STAGE_NAMES):  # a chain of one-to-one stages runs at once (flows/overlap.py)
            stop = ledger.stop_reason() if ledger is not None else None
            work: list[StageWork] = []
            for stage in stages:
                pending = book.pending(stage)  # the plan grows first by supplements (fan_in.py)
                if stop is not None:  # the budget is spent: no stage starts any more
                    book.not_started(pending, stop)
                    continue
                if pending:
                    work.append(_stage_work(
                        stage, pending, work, book, config.run.fan_in == "proceed",
                        lambda spec: ShardJob(run_id, config, spec, base_url, driver, limits),
                    ))
            group = Group(ledger.stop_reason if ledger is not None else lambda: None, display)
            running = flows.start(work, group, lambda item: stage_flow(
                run_id, config, item.stage, item.ready, item.blocked, str(book.stats.path), return_state=True))
            running.settled()  # the next group needs the shards, not the flows' ends
            book.settled(stages, [job.spec for item in work for job in item.ready])
            if group.refused is not None:  # every later request of that shape would be refused alike
                stage, stopped = group.refused
                get_run_logger().error("run stopped at the %s stage: %s", stage, stopped)
                break
            for stage in stages:
                book.grow_pool(stage)
        if ledger is not None:
            stop = ledger.stop_reason()
    summary = book.finish(stopped, stop)
    # A run below its floors is not exported either (see toolfactory.run.floors).
    with untagged_tasks():
        exported = export_dataset(config, store, run_id) if summary.status == "completed" else {}
    report = _report(store, str(book.stats.path), run_id)
    _publish(book.manifest, store, summary, report, exported)
    return summary


@task(name="export")
def export_dataset(config: Config, store: ObjectStore, run_id: str) -> dict[str, str]:
    """The run's dataset in each of `export.formats`, next to the run; format -> folder."""
    settings = config.export
    splits = SplitSpec(**settings.splits, by=settings.split_by)
    written = {}
    for fmt in settings.formats:
        out = OutputDir(store.uri(f"runs/{run_id}/export/{fmt}"), endpoint_url=config.storage.endpoint_url,
                        region=config.storage.region)
        summary = export_run(store, run_id, fmt, out, splits=splits, seed=config.run.seed or 0,
                             options=ExportOptions(preference=settings.preference))
        get_run_logger().info("export %s: %d of %d records, skipped %s", fmt, summary["exported"], summary["records"], summary["skipped"])
        written[fmt] = store.uri(f"runs/{run_id}/export/{fmt}/")
    return written


def _report(store: ObjectStore, stats_path: str, run_id: str) -> str | None:
    """The run's HTML report (charts of the stats and the dataset); a failure is logged, not fatal."""
    try:
        return str(build_report(store, stats_path, run_id)["uri"])
    except Exception as exc:  # the dataset is complete without its report
        get_run_logger().warning("the run report could not be built: %s: %s", type(exc).__name__, exc)
        return None


def untagged_tasks() -> TagsContext:
    """A block whose task runs carry no tags, while the run's flows keep theirs (the UI filters
    runs by their flows' tags). Before a tagged task run starts, Prefect asks its server for the
    concurrency slots of each tag: one round trip per shard, which a server busy with a run's
    events answers in up to 2 s (measured: a warm small run in one process took 0.71x the time
    without them). The factory limits its requests itself (toolfactory.llm.limits), not with
    Prefect's limits."""
    return TagsContext(current_tags=set())


def run_tags(config: Config) -> list[str]:
    """Prefect tags of a run's flows (not of its task runs, see :func:`untagged_tasks`): what it
    was made with, to filter runs in the UI."""
    recipes = "+".join(sorted(name for name, weight in config.tasks.recipes.items() if weight > 0))
    return ["toolfactory", f"provider:{config.llm.provider}", f"recipes:{recipes}"]


def run_state(summary: RunSummary) -> Any:
    """The final Prefect state of a run's flow: its summary, or `Failed` when a shard is missing,
    with the shards and the command that finishes the run (see :mod:`toolfactory.run.outcome`).
    The summary leaves the flow as its JSON object (:meth:`RunSummary.to_dict`), as Prefect
    keeps a result and a failed state's data."""
    if summary.status == "completed":
        return summary.to_dict()
    message = summary.message or failure_message(summary, summary.rerun or "")
    return Failed(message=message, data=RunFailed(message, summary.to_dict()))


def final_state(manifest: Manifest, store: ObjectStore, base_url: str | None, checksums: bool = False) -> Any:
    """The final state of a run's flow once what is left of it ran (:func:`run_state`); a disk that
    filled stops it with one line and the command that finishes it once there is room."""
    try:
        return run_state(execute_run(manifest, store, base_url, checksums))
    except Exception as exc:
        if not disk_full(exc):
            raise
        storage = manifest.run_config().storage
        return full_disk_state(exc, rerun_command(manifest.run_id, store, storage.endpoint_url, storage.region))


def summary_of(state: State[Any]) -> dict[str, Any]:
    """The summary a run's flow returned, failed or not, as its JSON object (what `toolfactory
    stats --json` prints); the flow's own error if it raised one."""
    result = state.result(raise_on_failure=False)
    if isinstance(result, RunFailed):
        return result.summary
    if isinstance(result, dict):
        return result
    return state.result()  # raises what ended the flow


def run_summary_of(state: State[Any]) -> RunSummary:
    """The summary a run's flow returned, failed or not (see :func:`summary_of`)."""
    return RunSummary.from_dict(summary_of(state))


# Named and given its task runner here, once: `with_options` per call would build the flow's
# parameter schema (the whole Config) again for every stage of every run.
@flow(name="stage", flow_run_name="{run_id}/{stage}", task_runner=KeptContextRayTaskRunner(), log_prints=False)
def stage_flow(run_id: str, config: Config, stage: str, jobs: list[ShardJob], blocked: list[int], stats_path: str) -> Any:
    """One stage of a run: one task per shard, each recorded as it finishes. `jobs` are submitted
    at once; in a group of stages that run at once (see :mod:`flows.overlap`), a shard that waits
    for its input shard is submitted when that commits. It ends `Failed` when a shard failed or
    could not start because its input is missing, or (one line) when the disk is full."""
    try:
        return _stage(config, stage, jobs, blocked, stats_path)
    except Exception as exc:
        if not disk_full(exc):
            raise
        return full_disk_state(exc)


def _stage(config: Config, stage: str, jobs: list[ShardJob], blocked: list[int], stats_path: str) -> Any:
    link = current_link(stage)
    link.started.set()
    link.all_started.wait()
    book = ShardBook(StatsDB(stats_path))
    shard = configured(config)
    logger = get_run_logger()
    for index in blocked:
        logger.warning("%s shard %d blocked: an input shard is missing (its shard failed)", stage, index)
    running: dict[Any, ShardJob] = {}

    def submit(job: ShardJob) -> None:
        with remote_options(num_cpus=config.orchestration.shard_cpus), untagged_tasks():
            future = shard.submit(job.run_id, job.spec.stage, job.spec.index, job)
        running[future.task_run_id] = job
        future.add_done_callback(link.inbox.put)  # from a Ray thread; read below, in this one

    for job in jobs:
        submit(job)
    failed: list[int] = []
    # The stage's shards in this flow, counted once: failed and blocked ones are among them.
    total = len(jobs) + len(link.awaited) + len(blocked)
    blocked, not_started = list(blocked), []
    with StageProgress(stage, len(jobs) + len(link.awaited), link.group.display) as progress:
        while running or link.awaited:
            event = link.inbox.get()
            if isinstance(event, Settled):
                job = link.awaited.pop(event.index)
                why = _not_starting(job, event.committed, link.group, book)
                if why is None:
                    submit(job)
                    continue
                progress.not_started()
                (blocked if why == "blocked" else not_started).append(event.index)
                link.settle(event.index, False)
                continue
            job = running.pop(event.task_run_id)
            event.wait()  # done: this only fetches its final state
            if event.state.is_completed():
                metrics: ShardMetrics = event.result()
                book.committed(metrics)
                progress.shard_done(metrics)
                link.settle(job.spec.index, True)
                logger.info(
                    "%s shard %d: %d in, %d out, %d rejected, %d LLM calls (%d cached) in %.1f s; stage so far: %s",
                    stage, job.spec.index, metrics.items_in, metrics.items_out, metrics.rejected,
                    metrics.llm.calls, metrics.llm.cache_hits, metrics.wall_s, progress.line(),
                )
                continue
            progress.shard_done(None)
            failed.append(job.spec.index)
            exception = _record_failure(book, job, event)
            if isinstance(exception, EndpointRefused):
                link.group.refuse(stage, str(exception))
            link.settle(job.spec.index, False)
    link.end()  # every shard has settled: the run may go on while this flow ends in Prefect
    refused = link.group.refused
    if refused is not None and refused[0] == stage:
        # The stage's one message: the role, the model and the endpoint's words.
        return Failed(message=f"{stage}: {refused[1]}")
    message = stage_failure(stage, total, failed, blocked, not_started)
    return Failed(message=message) if message else None


def stage_failure(stage: str, total: int, failed: list[int], blocked: list[int], not_started: list[int]) -> str | None:
    """The one line of a stage flow that did not complete: which of its `total` shards failed,
    were blocked or did not start (None: every shard completed)."""
    parts = [f"{len(shards)} {what} {sorted(shards)}"
             for what, shards in (("failed", failed), ("blocked", blocked), ("not started", not_started)) if shards]
    if not parts:
        return None
    done = total - len(failed) - len(blocked) - len(not_started)
    return f"{stage}: {', '.join(parts)} of {total} shard(s) ({done} completed)"


def _not_starting(job: ShardJob, committed: bool, group: Group, book: ShardBook) -> str | None:
    """Why a shard that waited for its input does not start now (recorded, unless the run was
    stopped by a refusal: then it never started, as the stages after one); None: it starts."""
    spec = job.spec
    if group.refused is not None:
        return "stopped"
    stop = group.budget_stop()
    if stop is not None:  # the budget is spent: no shard starts any more
        book.not_started(job.run_id, [spec], stop)
        return "budget"
    if not committed:
        book.blocked(job.run_id, spec, list(spec.inputs))
        return "blocked"
    return None


def _record_failure(book: ShardBook, job: ShardJob, future: Any) -> BaseException | None:
    """Record a failed shard with its error and attempts (and what it spent, if it says); its
    exception."""
    logger = get_run_logger()
    exception = _exception_of(future.state)
    error = f"{type(exception).__name__}: {exception}"[:2000] if exception else str(future.state.message)
    if exception is not None and disk_full(exception):
        error = full_disk_line(exception)  # the system's words, not those of the library that met it
    attempts = _attempts(future.task_run_id)
    ran = f"after {attempts} attempt(s)" if attempts else "before its task started"
    logger.warning("%s shard %d failed %s: %s", job.spec.stage, job.spec.index, ran, error)
    book.failed(job.run_id, job.spec, attempts, error, getattr(exception, "metrics", None))
    return exception


def _exception_of(state: Any) -> BaseException | None:
    """The task's own exception, as Prefect kept it with the failed state."""
    try:
        state.result()
    except BaseException as exc:
        return exc
    return None


def _attempts(task_run_id: Any) -> int:
    """How often the task ran; 0 if it never reached the API (its worker died before it began)."""
    with get_client(sync_client=True) as client:
        try:
            return int(client.read_task_run(task_run_id).run_count or 1)
        except ObjectNotFound:
            return 0


def _stage_work(stage: str, pending: list[ShardSpec], before: list[StageWork], book: RunBook, proceed: bool,
                job: Callable[[ShardSpec], ShardJob]) -> StageWork:
    """A stage's part in its group: a shard whose input shard is still to run in the stage before
    it in the group waits for that; any other runs if its inputs exist, else is recorded blocked."""
    upstream = before[-1].indices() if before and follows(stage) == before[-1].stage else set()
    waiting = [spec for spec in pending if spec.index in upstream]
    runnable = book.runnable([spec for spec in pending if spec.index not in upstream], proceed)
    blocked = {spec.index for spec in pending} - {spec.index for spec in (*runnable, *waiting)}
    # A stage whose shards are all blocked still shows, as failed.
    return StageWork(stage, [job(spec) for spec in runnable], [job(spec) for spec in waiting], sorted(blocked))


def _publish(manifest: Manifest, store: ObjectStore, summary: RunSummary, report: str | None, exported: dict[str, str]) -> None:
    """Prefect artifacts: per-stage pass rates, shard status and where the output is."""
    # The same keys every run: Prefect keeps each key's versions, so the UI shows the nightly trend.
    key = "toolfactory"
    # The table's rows are the artifact's own format: column title -> cell.
    rows = [
        {
            "stage": s.stage,
            "shards": f"{s.shards_completed}/{s.shards_total}",
            "failed": s.shards_failed,
            "in": s.items_in,
            "out": s.items_out,
            "pass rate": "-" if s.pass_rate is None else f"{s.pass_rate:.1%}",
            "llm calls": s.llm_calls,
            "cache hits": s.cache_hits,
            "tokens": s.tokens,
            "cost (USD)": "-" if s.cost_usd is None else f"{s.cost_usd:.4f}",
            "top rejection": next(iter(s.rejections), "-"),
        }
        for s in summary.stages
    ]
    create_table_artifact(rows, key=f"{key}-stages", description=f"Per-stage pass rates of run {manifest.run_id} ({summary.status})")
    failed = [f"| {s.stage} | {f.shard} | {f.status} | {f.error} |" for s in summary.stages for f in s.failed_shards]
    lines = [
        f"# Run {manifest.run_id}: {summary.status}",
        *([f"- reason: {summary.reason}"] if summary.reason else []),
        *([f"{summary.message}", ""] if summary.message else []),
        f"- LLM cost: {_cost_line(summary)}",
        f"- dataset: `{store.uri(f'runs/{manifest.run_id}/{DATASET_STAGE}/')}`",
        f"- rejected records: `{store.uri(f'runs/{manifest.run_id}/<stage>/rejected/')}`",
        f"- manifest: `{store.uri(manifest.path)}`",
        f"- report: `{report}`" if report else "- report: not built (see the flow's log)",
        *(f"- export ({fmt}): `{folder}`" for fmt, folder in exported.items()),
    ]
    if failed:
        lines += ["", "## Shards to re-run", f"`{summary.rerun or ''}`", "",
                  "| stage | shard | status | error |", "| --- | --- | --- | --- |", *failed]
    create_markdown_artifact("\n".join(lines), key=f"{key}-status", description="Shard status and output")


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _cost_line(summary: RunSummary) -> str:
    """The run's cost in USD and per role ("-": a role that used tokens has no price)."""
    roles = ", ".join(f"{role} {_usd(usage.cost_usd)}" for role, usage in summary.cost_by_role.items())
    total = summary.cost_usd
    head = _usd(total) if total is not None else "unknown: not every role used has a price (llm.roles.<role>.usd_per_million_*)"
    return head + (f" ({roles})" if roles else "")
