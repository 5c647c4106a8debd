"""Floors a finished run must reach to count as a success: `run.min_accepted`,
`run.min_pass_rate` and `verify.judge_min_agreement` (the judges against execution's verdicts,
:mod:`toolfactory.stages.verify.referee`).

Every shard of a run may commit and the run still be of no use: an endpoint that answers but
whose answers all fail verification, a model that ignores the schema, a recipe that keeps nothing.
A run below a floor ends failed with the reason, like a run with a missing shard, so that a
nightly job alerting on failed runs sees it. Its records stay where they are, but it is not
exported: an export is what downstream training picks up, and it should hold only a dataset that
met its floors (`toolfactory export RUN` still writes one on demand).
"""

from __future__ import annotations

from typing import Any

from toolfactory.config import RunConfig, VerifyConfig
from toolfactory.stages import DATASET_STAGE
from toolfactory.stages.verify.referee import REFEREE, below_agreement


def below_floors(run: RunConfig, summary: dict[str, Any], verify: VerifyConfig | None = None) -> list[str]:
    """One sentence per floor the run's `summary` (see StatsDB.run_summary) is below."""
    stages = {stage["stage"]: stage for stage in summary["stages"]}
    reasons = []
    accepted = int(stages.get(DATASET_STAGE, {}).get("items_out") or 0)
    if accepted < run.min_accepted:
        reasons.append(f"run.min_accepted: the dataset holds {accepted} accepted dialogue(s), fewer than {run.min_accepted}")
    for stage, floor in run.min_pass_rate.items():
        rate = stages.get(stage, {}).get("pass_rate")
        if rate is not None and rate < floor:
            reasons.append(f"run.min_pass_rate.{stage}: the {stage} stage kept {rate:.1%} of its records, below {floor:.1%}")
    if verify is not None and verify.judge_min_agreement is not None and verify.judges:
        refereed = stages.get("verify", {}).get("profile", {}).get(REFEREE, {})
        if (reason := below_agreement(verify.judge_min_agreement, refereed)) is not None:
            reasons.append(reason)
    return reasons
