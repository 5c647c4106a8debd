"""Cost in the stats: per role, stage and run, from every attempt, unknown (never zero) where a
role that used tokens has no price; and what a run has spent, which a re-run's budget starts from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.stats import StatsDB

STAGES = ("tasks", "dialogues")


def metrics(stage: str, shard: int, attempt: str, roles: dict[str, tuple[int, int, float | None]]) -> ShardMetrics:
    by_role = {role: {"calls": 1, "cache_hits": 0, "retries": 0, "reasks": 0, "prompt_tokens": p, "completion_tokens": c,
                      "latency_s": 0.1, "failures": {}, "cost_usd": cost} for role, (p, c, cost) in roles.items()}
    costs = [u["cost_usd"] for u in by_role.values()]
    return ShardMetrics.from_dict({
        "attempt_id": attempt, "run_id": "r", "stage": stage, "shard": shard, "fingerprint": "f",
        "items_in": 2, "items_out": 2, "rejected": 0, "started_at": "2026-01-01T00:00:00", "finished_at": "2026-01-01T00:00:01",
        "wall_s": 1.0, "llm_by_role": by_role,
        "llm": {"calls": len(roles), "prompt_tokens": sum(p for p, _, _ in roles.values()),
                "completion_tokens": sum(c for _, c, _ in roles.values()),
                "cost_usd": None if None in costs else sum(c for c in costs if c is not None)},
    })


@pytest.fixture
def db(tmp_path: Path) -> StatsDB:
    stats = StatsDB(tmp_path / "stats.duckdb")
    stats.start_run("r", "2026-01-01", str(tmp_path), {}, {}, "2026-01-01T00:00:00")
    return stats


def test_cost_per_role_stage_and_run_counts_failed_attempts_too(db: StatsDB) -> None:
    db.record_shard(metrics("tasks", 0, "a1", {"user": (1000, 100, 0.003)}), 1)
    db.record_shard_status("r", "dialogues", 0, "failed", 1, "BudgetExhausted: …", "f",
                           metrics=metrics("dialogues", 0, "a2", {"assistant": (2000, 500, 0.009), "tool": (300, 60, 0.001)}))
    db.record_shard(metrics("dialogues", 0, "a3", {"assistant": (10, 5, 0.0001)}), 2)
    summary = db.run_summary("r", STAGES)
    cost = {s.stage: s.cost_usd for s in summary.stages}
    assert cost == {"tasks": pytest.approx(0.003), "dialogues": pytest.approx(0.0101)}
    assert summary.cost_usd == pytest.approx(0.0131)
    assert summary.cost_by_role["assistant"].model_dump() == {"calls": 2, "prompt_tokens": 2010, "cached_prompt_tokens": 0, "completion_tokens": 505,
                                                    "cost_usd": pytest.approx(0.0091)}
    assert db.run_spend("r") == (4, 1000 + 100 + 2000 + 500 + 300 + 60 + 15, pytest.approx(0.0131))


def test_a_role_without_a_price_makes_the_cost_unknown_not_zero(db: StatsDB) -> None:
    db.record_shard(metrics("tasks", 0, "a1", {"user": (1000, 100, 0.003)}), 1)
    db.record_shard(metrics("dialogues", 0, "a2", {"assistant": (2000, 500, None)}), 1)
    summary = db.run_summary("r", STAGES)
    assert [s.cost_usd for s in summary.stages] == [pytest.approx(0.003), None]
    assert summary.cost_usd is None and summary.cost_by_role["assistant"].cost_usd is None


def with_cached(metrics: ShardMetrics, role: str, cached: int) -> ShardMetrics:
    item: dict[str, Any] = metrics.to_dict()
    item["llm_by_role"][role]["cached_prompt_tokens"] = cached
    item["llm"]["cached_prompt_tokens"] = cached
    return ShardMetrics.from_dict(item)


def test_cached_prompt_tokens_are_kept_per_role_and_stage(db: StatsDB) -> None:
    db.record_shard(with_cached(metrics("dialogues", 0, "a1", {"assistant": (2000, 500, 0.009)}), "assistant", 1536), 1)
    db.record_shard(with_cached(metrics("dialogues", 1, "a2", {"assistant": (1000, 100, 0.004)}), "assistant", 0), 1)
    summary = db.run_summary("r", STAGES)
    assert summary.cost_by_role["assistant"].cached_prompt_tokens == 1536
    assert [s.cached_prompt_tokens for s in summary.stages if s.stage == "dialogues"] == [1536]


def test_a_file_written_before_cached_tokens_were_counted_takes_them_on_its_next_write(tmp_path: Path) -> None:
    path = tmp_path / "stats.duckdb"
    StatsDB(path).start_run("r", "2026-01-01", str(tmp_path), {}, {}, "2026-01-01T00:00:00")
    con = duckdb.connect(str(path))
    con.execute("DROP VIEW stage_metrics")  # the view reads the column: dropped with it, as it was before
    for table in ("shard_attempts", "llm_usage"):
        con.execute(f"ALTER TABLE {table} DROP COLUMN cached_prompt_tokens")
    con.close()
    db = StatsDB(path)
    db.record_shard(with_cached(metrics("tasks", 0, "a1", {"user": (1000, 100, 0.003)}), "user", 512), 1)
    summary = db.run_summary("r", STAGES)
    assert summary.cost_by_role["user"].cached_prompt_tokens == 512
    assert summary.cost_by_role["user"].prompt_tokens == 1000
