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

from toolfactory.config import RunConfig, VerifyConfig
from toolfactory.run.summary import RunSummary
from toolfactory.stages import DATASET_STAGE
from toolfactory.stages.verify.referee import REFEREE, below_agreement


def below_floors(run: RunConfig, summary: RunSummary, verify: VerifyConfig | None = None) -> list[str]:
    """One sentence per floor the run's `summary` is below."""
    reasons = []
    dataset = summary.stage(DATASET_STAGE)
    accepted = dataset.items_out if dataset is not None else 0
    if accepted < run.min_accepted:
        reasons.append(f"run.min_accepted: the dataset holds {accepted} accepted dialogue(s), fewer than {run.min_accepted}")
    for stage, floor in run.min_pass_rate.items():
        rate = numbers.pass_rate if (numbers := summary.stage(stage)) is not None else None
        if rate is not None and rate < floor:
            reasons.append(f"run.min_pass_rate.{stage}: the {stage} stage kept {rate:.1%} of its records, below {floor:.1%}")
    if verify is not None and verify.judge_min_agreement is not None and verify.judges:
        verified = summary.stage("verify")
        refereed = verified.profile.get(REFEREE, {}) if verified is not None else {}
        if (reason := below_agreement(verify.judge_min_agreement, refereed)) is not None:
            reasons.append(reason)
    return reasons
