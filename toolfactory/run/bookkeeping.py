"""What the driver records of a run while it executes it, behind a few named steps.

The flow that executes a run (`flows/execute.py`) orchestrates: it starts Ray and the stage
flows, and submits the shards. Everything it keeps on the way is here: the stats in DuckDB (the
driver is their only writer, docs/architecture.md §8), the run record in storage, the manifest
as the plan grows by fan-in supplements or a fan-in shard commits without some inputs (§4, rule
8), the damaged files rebuilt before anything is planned (rule 10), and the pool files a finished
stage publishes. :class:`RunBook` is the run's; :class:`ShardBook` is what a stage flow records of
each of its shards, and it writes the same database.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from toolfactory.run.attempts import attempt_usage
from toolfactory.run.fan_in import available, decides_again, fan_in_upstream, grown, reselection, supplements
from toolfactory.run.floors import below_floors
from toolfactory.run.integrity import check_run, pool_advice, shards_to_rebuild, uncommit
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.run.metrics import AttemptUsage, ShardMetrics, stored_metrics
from toolfactory.run.outcome import budget_message, failure_message, rerun_command, with_larger_budget
from toolfactory.run.pool import publish, publish_dialogues
from toolfactory.run.record import publish_run_record
from toolfactory.run.stats import StatsDB
from toolfactory.run.stats_sync import sync_stats
from toolfactory.run.summary import RunSummary
from toolfactory.stages import DATASET_STAGE, STAGE_NAMES, ShardSpec
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import ShardPaths


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ShardBook:
    """A shard's outcome in the stats: committed, failed, blocked by a missing input, not started."""

    def __init__(self, stats: StatsDB) -> None:
        self.stats = stats

    def committed(self, metrics: ShardMetrics) -> None:
        """A committed shard, from the metrics its task returned or its sidecar holds."""
        self.stats.record_shard(metrics, metrics.attempts or 1)

    def failed(self, run_id: str, spec: ShardSpec, attempts: int, error: str, metrics: dict[str, Any] | None) -> None:
        """A shard that failed, with its error, its attempts and what it spent (if its error says:
        the plain data of :class:`~toolfactory.run.metrics.ShardMetrics` an exception carries)."""
        spent = ShardMetrics.from_dict(metrics) if metrics is not None else None
        self.stats.record_shard_status(run_id, spec.stage, spec.index, "failed", attempts, error, spec.fingerprint(),
                                       metrics=spent)

    def blocked(self, run_id: str, spec: ShardSpec, missing: list[str]) -> None:
        """A shard that cannot start: these inputs are missing (their shards failed)."""
        error = f"input shard missing (its shard failed): {', '.join(missing)}"
        self.stats.record_shard_status(run_id, spec.stage, spec.index, "blocked", 0, error, spec.fingerprint())

    def not_started(self, run_id: str, specs: list[ShardSpec], reason: str) -> None:
        """Shards that do not start because the run stops (the budget is spent)."""
        for spec in specs:
            self.stats.record_shard_status(run_id, spec.stage, spec.index, "blocked", 0, f"not started: {reason}",
                                           spec.fingerprint())


class RunBook:
    """The driver's records of one execution of a run: its stats, run record, manifest and pool.

    `manifest` and `plan` are the run's current ones: they grow as the execution goes on."""

    def __init__(self, manifest: Manifest, store: ObjectStore, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self.manifest = manifest
        self.store = store
        self.log = log
        self.config = manifest.run_config()
        self.stats = StatsDB(self.config.stats_path())
        self.shards = ShardBook(self.stats)
        self.plan = manifest.shard_plan()

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    def start(self, checksums: bool) -> None:
        """Record the run as started, from what storage holds; clear what a killed run left; make
        each shard whose files are damaged (sizes; with `checksums`, every checksum too) not done,
        with every shard that read them, so this execution builds them again."""
        run_id, manifest, store = self.run_id, self.manifest, self.store
        sync_stats(store, self.stats, run_id)  # a re-run on another machine goes on from what storage holds
        made_by = manifest.endpoint()
        with self.stats.burst():
            self.stats.start_run(run_id, manifest.created_at, store.url, manifest.config, manifest.versions, now(),
                                 made_by.label, made_by.simulated)
            self.publish_record()
        store.remove_temporary(f"runs/{run_id}")  # left by a killed run; never read
        store.abort_uploads(f"runs/{run_id}/")  # likewise, on S3
        self._rebuild_damaged(checksums)

    def widest_stage(self) -> int:
        """The most shards of one stage in the plan."""
        return max((len(specs) for specs in self.plan.values()), default=0)

    def pending(self, stage: str) -> list[ShardSpec]:
        """The stage's shards still to run. Inputs a fan-in stage ran without that have arrived
        grow the plan by supplement shards first, or have the selection made again (both kept in
        the manifest before they run); shards already committed are recorded from their metrics
        sidecar."""
        if decides_again(stage):
            self._select_again(stage)
        added = supplements(stage, self.plan, self.store, self.run_id)
        if added:
            self.plan[stage] = grown(self.plan[stage], added)
            self._write_plan()
            self.log.info("%s: %d supplement shard(s) for inputs that arrived late", stage, len(added))
        pending = []
        for spec in self.plan[stage]:
            paths = ShardPaths(self.run_id, spec.stage, spec.index)
            metrics = stored_metrics(self.store, paths) if self.store.exists(paths.main) else None
            if metrics is None:
                pending.append(spec)
            else:
                self.shards.committed(metrics)
        return pending

    def runnable(self, specs: list[ShardSpec], proceed: bool) -> list[ShardSpec]:
        """The shards whose inputs exist, the others recorded blocked; with `proceed`, a fan-in
        shard runs on the inputs that exist."""
        runnable = []
        for spec in specs:
            missing = [path for path in spec.inputs if not self.store.exists(path)]
            if missing and proceed and fan_in_upstream(spec.stage) and (partial := available(spec, self.store)) is not None:
                self.log.warning("%s shard %d proceeds without %d missing input(s): %s", spec.stage, spec.index,
                                 len(missing), ", ".join(missing))
                runnable.append(partial)
            elif missing:
                self.shards.blocked(self.run_id, spec, missing)
            else:
                runnable.append(spec)
        return runnable

    def not_started(self, specs: list[ShardSpec], reason: str) -> None:
        self.shards.not_started(self.run_id, specs, reason)

    def settled(self, stages: tuple[str, ...], ran: list[ShardSpec]) -> None:
        """After a group of stages: which fan-in shards of `ran` committed without some inputs (in
        the manifest), every attempt's LLM use, killed ones included (their task never returned
        metrics), and the run record."""
        entries = [
            {"stage": spec.stage, "shard": spec.index, "missing": spec.params["missing_inputs"], "at": now()}
            for spec in ran
            if spec.params.get("missing_inputs") and self.store.exists(ShardPaths(self.run_id, spec.stage, spec.index).main)
        ]
        if entries:
            self._write_manifest({"partial": [*self.manifest.partial, *entries]})
        usage: dict[str, list[AttemptUsage]] = {stage: list(attempt_usage(self.store, self.run_id, stage)) for stage in stages}
        with self.stats.burst():
            for stage in stages:
                self.stats.record_attempts(usage[stage])
            self.publish_record()

    def grow_pool(self, stage: str) -> None:
        """Publish what a finished stage adds to `<root>/pool` (idempotent, so a re-run may repeat
        it); a supplement shard (fan_in.py) publishes a file of its own."""
        run_id, plan = self.run_id, self.plan
        if stage == "pool":
            for spec in plan["pool"]:
                domains = [ShardPaths(run_id, s.stage, s.index) for s in plan.get("domains", [])] if spec.index == 0 else []
                added = publish(self.store, run_id, ShardPaths(run_id, "pool", spec.index), domains)
                self.log.info("pool: %d new tools and %d context-tree nodes published", added["tools"], added["nodes"])
        elif stage == DATASET_STAGE:
            for spec in plan[DATASET_STAGE]:
                count = publish_dialogues(self.store, run_id, ShardPaths(run_id, DATASET_STAGE, spec.index),
                                          ShardPaths(run_id, "measure", spec.index))
                self.log.info("pool: signatures of %d dialogues published", count)

    def finish(self, stopped: str | None, stop: str | None) -> RunSummary:
        """Record how the run ended and return its summary (see :meth:`StatsDB.run_summary`):
        `stopped` says why it stopped early (an endpoint's repeated refusals), `stop` that the
        budget is spent. A run with shards not committed gets the command that finishes it."""
        config, run_id = self.config, self.run_id
        failed = [s for specs in self.plan.values() for s in specs
                  if not self.store.exists(ShardPaths(run_id, s.stage, s.index).main)]
        with self.stats.burst():  # one open of the file for the run's last records
            reasons = [stopped] if stopped else [] if failed else below_floors(config.run, self.stats.run_summary(run_id, STAGE_NAMES), config.verify)
            status = "budget_exhausted" if failed and stop is not None else "failed" if failed or reasons else "completed"
            self.stats.finish_run(run_id, status, now(), "; ".join(reasons) or None)
            summary = self.stats.run_summary(run_id, STAGE_NAMES)
            if failed:
                rerun = rerun_command(run_id, self.store, config.storage.endpoint_url, config.storage.region)
                if stop is not None:
                    rerun = with_larger_budget(rerun, config.llm.budget)
                    summary = summary.ended(rerun, budget_message(summary, stop, rerun))
                else:
                    summary = summary.ended(rerun, failure_message(summary, rerun))
                self.stats.record_message(run_id, summary.message)
            self.publish_record()
        return summary

    def _select_again(self, stage: str) -> None:
        """Plan the run's selection (`stage`) over every part it reads, and make the selection it
        replaces not done, with the dataset parts it decided (see :func:`~toolfactory.run.fan_in.reselection`)."""
        redo = reselection(stage, self.plan, self.store, self.run_id, self.config.run.fan_in == "proceed")
        if redo is None:
            return
        left = [spec for spec in self.plan[stage] if spec.index != redo.select.index]
        self.plan[stage] = [redo.select]
        self._write_plan()
        uncommit(self.store, self.run_id, redo.stale)
        for spec in left:  # a selection of an older plan that completed another: no longer the run's
            paths = ShardPaths(self.run_id, spec.stage, spec.index)
            for path in (paths.main, paths.metrics, paths.rejected):
                self.store.delete(path)
        if redo.stale:
            curated = sum(spec.stage == DATASET_STAGE for spec in redo.stale)
            self.log.info("%s: decided again over %d %s part(s), replacing the selection made without some of "
                          "them; the %d dataset part(s) it decided are made again", stage, len(redo.select.inputs),
                          fan_in_upstream(stage), curated)

    def _write_plan(self) -> None:
        self._write_manifest({"plan": {name: [spec.to_dict() for spec in specs] for name, specs in self.plan.items()}})

    def publish_record(self) -> None:
        """The run record in storage, from the stats (runs/<run_id>/run.json)."""
        publish_run_record(self.store, self.stats, self.run_id, STAGE_NAMES)

    def _write_manifest(self, update: dict[str, Any]) -> None:
        """The manifest with `update`, written, so that a re-run of a killed re-run finds it."""
        self.manifest = self.manifest.model_copy(update=update)
        write_manifest(self.store, self.manifest)

    def _rebuild_damaged(self, checksums: bool) -> None:
        """Name each damaged file of the run, and make its shard and every shard that read it not
        done (see :mod:`toolfactory.run.integrity`)."""
        config, store, run_id = self.config, self.store, self.run_id
        check = check_run(store, run_id, self.plan, checksums)
        if check.ok:
            return
        for damage in check.damaged:
            if damage in check.beyond and damage.path.startswith("pool/"):
                advice = pool_advice(store, damage.path, config.storage.endpoint_url, config.storage.region)
                self.log.error("damaged pool file: %s; a shard of this run that reads it fails until %s", damage.line(store), advice)
            elif damage in check.beyond:
                self.log.error("damaged input of the run: %s; it was stored when the run was planned and cannot be rebuilt: "
                               "start a new run", damage.line(store))
            else:
                self.log.warning("damaged: %s", damage.line(store))
        rebuild = shards_to_rebuild(check, self.plan, run_id)
        if rebuild:
            uncommit(store, run_id, rebuild)
            self.log.warning("%d shard(s) to build again, with those that read a damaged one: %s", len(rebuild),
                             ", ".join(f"{spec.stage}/part-{spec.index:05d}" for spec in rebuild))
