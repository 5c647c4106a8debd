"""What the stats answer: a run's summary, its facts for its run record, what it has spent.

Each function reads within the caller's connection (read-only is enough), so it works on a file
being written by a run's driver and on a file of an older version (times read through
:func:`~toolfactory.run.stats.schema.ts`).
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from toolfactory.run.stats.schema import TIMESTAMPS, USES, iso_time, ts
from toolfactory.run.summary import (
    FailedShard, LastAttempt, LayerCount, RoleCost, RunSummary, StageSummary, per_accepted,
)


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute(f"SELECT run_id FROM runs ORDER BY {ts('started_at')} DESC, run_id DESC LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def run_facts(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The run's row (None if unknown) and its shards that did not complete, as a run record keeps
    them (:mod:`toolfactory.run.record`: the JSON of a stored file, so plain objects)."""
    con.execute(f"""SELECT run_id, {ts('created_at')} AS created_at, {ts('started_at')} AS started_at,
                           {ts('finished_at')} AS finished_at, status, reason, message, storage, config,
                           versions, attempts, made_by, simulated FROM runs WHERE run_id = ?""", [run_id])
    columns = [d[0] for d in con.description or ()]
    row = con.fetchone()
    shards = con.execute(
        """SELECT stage, shard, status, attempts, error, fingerprint FROM shards
           WHERE run_id = ? AND status <> 'completed' ORDER BY stage, shard""", [run_id]).fetchall()
    if row is None:
        return None, []
    run = dict(zip(columns, row))
    for name in TIMESTAMPS["runs"]:
        run[name] = iso_time(run[name])
    run["config"], run["versions"] = json.loads(run["config"] or "{}"), json.loads(run["versions"] or "{}")
    keys = ("stage", "shard", "status", "attempts", "error", "fingerprint")
    return run, [dict(zip(keys, shard)) for shard in shards]


def run_spend(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[int, int, float]:
    """(requests answered, tokens, USD) of every recorded attempt of the run, failed ones too."""
    row = con.execute(
        """SELECT coalesce(sum(llm_calls), 0), coalesce(sum(prompt_tokens + completion_tokens), 0),
                  coalesce(sum(cost_usd), 0) FROM shard_attempts WHERE run_id = ?""", [run_id]).fetchone()
    return (int(row[0]), int(row[1]), float(row[2])) if row else (0, 0, 0.0)


def usage_by_role(con: duckdb.DuckDBPyConnection, run_id: str) -> list[tuple[str, int, int, int, int, int]]:
    """(role, calls, cache hits, prompt tokens, completion tokens, cached prompt tokens) of every
    attempt of the run, completed or not, as the per-stage totals count them; by role."""
    rows = con.execute(
        """SELECT role, sum(calls), sum(cache_hits), sum(prompt_tokens), sum(completion_tokens),
                  sum(coalesce(cached_prompt_tokens, 0))
           FROM llm_usage WHERE run_id = ? GROUP BY role ORDER BY role""",
        [run_id],
    ).fetchall()
    return [(str(role), int(c or 0), int(h or 0), int(p or 0), int(o or 0), int(k or 0)) for role, c, h, p, o, k in rows]


def _round(value: Any, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def run_summary(con: duckdb.DuckDBPyConnection, run_id: str, stage_order: tuple[str, ...]) -> RunSummary:
    """The run's summary (:class:`~toolfactory.run.summary.RunSummary`), one stage per stage of
    the run in `stage_order` (stages not in it last, by name)."""
    # A run executed more than once (re-runs) started with its first execution, when it was
    # planned (`created_at`); `started_at` is its last execution's start.
    first = f"coalesce({ts('created_at')}, {ts('started_at')})"
    run = con.execute(
        f"""SELECT status, {first}, {ts('finished_at')}, epoch({ts('finished_at')} - {first}), reason, message,
                   made_by, simulated, coalesce(attempts, 1), {ts('started_at')},
                   epoch({ts('finished_at')} - {ts('started_at')})
            FROM runs WHERE run_id = ?""", [run_id]).fetchone()
    roles = con.execute(
        """SELECT role, sum(calls), sum(prompt_tokens), sum(completion_tokens), sum(cached_prompt_tokens),
                  CASE WHEN bool_or(cost_usd IS NULL AND prompt_tokens + completion_tokens > 0) THEN NULL
                       ELSE coalesce(sum(cost_usd), 0) END
           FROM llm_usage WHERE run_id = ? GROUP BY role ORDER BY role""", [run_id]).fetchall()
    rows = con.execute("SELECT * FROM stage_metrics WHERE run_id = ?", [run_id]).fetchall()
    columns = [d[0] for d in con.description] if con.description else []
    reasons = con.execute(
        "SELECT stage, reason, sum(count) FROM rejections WHERE run_id = ? GROUP BY stage, reason ORDER BY 3 DESC, 2",
        [run_id],
    ).fetchall()
    layers = con.execute(
        """SELECT stage, layer, sum(items_in), sum(passed) FROM layer_metrics WHERE run_id = ?
           GROUP BY stage, layer
           ORDER BY stage, CASE layer WHEN 'rules' THEN 0 WHEN 'execution' THEN 1 WHEN 'model' THEN 2 ELSE 3 END,
                    sum(items_in) DESC, layer""",
        [run_id],
    ).fetchall()
    profiles = con.execute(
        """SELECT stage, dimension, value, sum(count) FROM profiles WHERE run_id = ?
           GROUP BY stage, dimension, value ORDER BY stage, dimension, sum(count) DESC, value""",
        [run_id],
    ).fetchall()
    missing = con.execute(
        """SELECT stage, input FROM shard_inputs WHERE run_id = ? GROUP BY stage, input
           HAVING NOT bool_or(read) ORDER BY stage, input""",
        [run_id],
    ).fetchall()
    errors = con.execute(
        "SELECT stage, shard, status, error FROM shards WHERE run_id = ? AND status <> 'completed' ORDER BY stage, shard",
        [run_id],
    ).fetchall()
    by_stage = {row[1]: dict(zip(columns, row)) for row in rows}
    stages = []
    for name in [s for s in stage_order if s in by_stage] + sorted(set(by_stage) - set(stage_order)):
        totals = by_stage[name]
        totals.pop("run_id")
        profile: dict[str, dict[str, int]] = {}
        for stage, dimension, value, count in profiles:
            if stage == name:
                profile.setdefault(dimension, {})[value] = int(count)
        for dimension, counts in profile.items():
            if dimension.endswith(USES):  # one value per tool or API: how many, not which
                profile[dimension] = {"distinct": len(counts), "total": sum(counts.values())}
        # Accepted over judged: well defined for stages that expand (one tool, many tasks) too.
        judged = totals["items_out"] + totals["rejected"]
        stages.append(StageSummary(
            **{**totals, "cost_usd": _round(totals["cost_usd"], 6)},
            pass_rate=round(totals["items_out"] / judged, 4) if judged else None,
            rejections={reason: int(n) for stage, reason, n in reasons if stage == name},
            layers={layer: LayerCount(items_in=int(n_in), passed=int(n_ok), pass_rate=round(n_ok / n_in, 4) if n_in else None)
                    for stage, layer, n_in, n_ok in layers if stage == name},
            profile=profile,
            # Inputs a fan-in stage proceeded without and no supplement has read yet (fan_in.py).
            missing_inputs=tuple(path for stage, path in missing if stage == name),
            failed_shards=tuple(FailedShard(shard=shard, status=status, error=error)
                                for stage, shard, status, error in errors if stage == name),
        ))
    by_role = {
        str(role): RoleCost(calls=int(calls or 0), prompt_tokens=int(p or 0), cached_prompt_tokens=int(cached or 0),
                            completion_tokens=int(c or 0), cost_usd=_round(cost, 6))
        for role, calls, p, c, cached, cost in roles
    }
    costs = [s.cost_usd for s in stages]
    return RunSummary(
        run_id=run_id,
        status=run[0] if run else None,
        per_accepted=per_accepted(tuple(stages)),
        started_at=iso_time(run[1]) if run else None,
        finished_at=iso_time(run[2]) if run else None,
        wall_s=_round(run[3], 3) if run else None,
        attempts=int(run[8]) if run else None,
        last_attempt=LastAttempt(started_at=iso_time(run[9]), wall_s=_round(run[10], 3)) if run else None,
        reason=run[4] if run else None,
        message=run[5] if run else None,
        made_by=run[6] if run else None,
        simulated=run[7] if run else None,
        cost_usd=None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 6),
        cost_by_role=by_role,
        stages=tuple(stages),
    )
