"""A report per run: ``runs/<run_id>/report/index.html`` with PNG charts next to it.

The page opens with a warning when the run's LLM was the offline simulator and, for a failed
run, its failed shards and the ``toolfactory rerun`` command. It shows the run's config and
models, the stage funnel (verify's rule and model layers included), time and tokens (cost when
priced) per stage, rejection reasons with an example record each, the mode and recipe mix of the
accepted dialogues (target vs shown mode) with a sample chat per recipe and mode, their
complexity and cluster coverage when a curation stage has recorded them, the pool's domains and
how much of the pool the tasks and the accepted dialogues cover, LLM calls and tokens per
accepted record, per stage and per role, a trend against earlier runs of the storage root, and
links to the exports. Readable without JavaScript; every chart's numbers are in a table too.
"""

from __future__ import annotations

from toolfactory.report.build import build_report, report_dir
from toolfactory.report.data import DialogueMix, ReportError, RunStats, load_run_stats, scan_dialogues

__all__ = ["DialogueMix", "ReportError", "RunStats", "build_report", "load_run_stats", "report_dir", "scan_dialogues"]
