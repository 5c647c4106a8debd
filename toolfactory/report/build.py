"""Build a run's report into the object store: ``runs/<run_id>/report/index.html`` and its PNGs.

I/O happens here only: the stats database (brought up to date from the store), the manifest, the exports, the accepted and rejected
shards are read (:mod:`toolfactory.report.data`, :mod:`.context`, :mod:`.samples`), the
sections decided and drawn (:mod:`.sections`,
:mod:`.charts`), then each chart and the page are written with the store's atomic writes. A
rebuild replaces the report and deletes charts of an earlier build that this one left out.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from toolfactory.stages import DATASET_STAGE
from toolfactory.report.context import load_context
from toolfactory.report.data import DialogueMix, RunStats, load_run_stats, scan_dialogues
from toolfactory.report.page import render_page
from toolfactory.report.samples import rejected_examples
from toolfactory.report.sections import sections
from toolfactory.run.stats import StatsDB
from toolfactory.run.stats_sync import sync_stats
from toolfactory.storage import ObjectStore


SIMULATOR_WARNING = ("This run's endpoint identified itself as toolfactory's offline simulator: its dialogues "
                     "show the pipeline at work and are not real training data.")


def report_dir(run_id: str) -> str:
    return f"runs/{run_id}/report"


def _facts(store: ObjectStore, stats: RunStats, mix: DialogueMix) -> dict[str, str]:
    return {
        "run": stats.run_id,
        "status": stats.status or "-",
        "started": stats.started_at or "-",
        "finished": stats.finished_at or "-",
        "accepted dialogues": f"{mix.records:,} in {mix.shards} shards",
        "dataset": store.uri(f"runs/{stats.run_id}/{DATASET_STAGE}/"),
        "report built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def build_report(store: ObjectStore, stats_path: str | Path, run_id: str) -> dict[str, Any]:
    """Write run `run_id`'s report; ``{"index": path, "charts": [paths], "uri": index URI, "problems":
    files of the store the stats skipped}``.

    The stats database is brought up to date from the store first (every run's record for the
    trend, this run's shard detail: :mod:`toolfactory.run.stats_sync`), so it may be a cache made on
    any machine, or none. Raises :class:`toolfactory.report.ReportError` when the stats have no
    such run."""
    synced = sync_stats(store, StatsDB(stats_path), run_id)
    stats = load_run_stats(stats_path, run_id)
    mix = scan_dialogues(store, run_id)
    folder = report_dir(run_id)
    failed = stats.status == "failed" or any(s.failed for s in stats.stages)
    context = load_context(store, stats_path, run_id, failed)
    parts = sections(stats, mix, context, tuple(rejected_examples(store, run_id, stats)))
    written = []
    for chart in (chart for section in parts for chart in section.charts):
        path = f"{folder}/{chart.file}"
        store.write_bytes(path, chart.png)
        written.append(path)
    for stale in store.list(f"{folder}/"):
        if stale.endswith(".png") and stale not in written:
            store.delete(stale)
    index = f"{folder}/index.html"
    page = render_page(f"toolfactory run {run_id}", _facts(store, stats, mix), parts, SIMULATOR_WARNING if context.simulated else None)
    store.write_bytes(index, page.encode("utf-8"))
    return {"index": index, "charts": written, "uri": store.uri(index), "problems": synced.problems}
