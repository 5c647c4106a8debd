"""The report's numbers: accepted dialogues counted shard by shard, LLM use per role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolfactory.report import data
from toolfactory.report.data import DialogueMix, Usage, load_run_stats, scan_dialogues

from .helpers import ROLES, RUN, open_store, write_dialogues


def test_scan_counts_accepted_shards_only(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    records = write_dialogues(store, (3, 4))  # beside a rejected part of 5 and a metrics file
    mix = scan_dialogues(store, RUN)
    assert (mix.shards, mix.records) == (2, 7)
    assert sum(mix.modes.values()) == len(records)
    assert mix.llm_calls == 3 * 7


def test_scan_reads_one_shard_at_a_time_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(tmp_path)
    write_dialogues(store, (2, 2, 2))
    counted: list[dict[str, Any]] = []
    reads: list[tuple[str, int]] = []
    read, add = data.read_records, DialogueMix.add

    def read_spy(store: Any, path: str) -> list[dict[str, Any]]:
        reads.append((path, len(counted)))
        return read(store, path)

    def add_spy(self: DialogueMix, record: dict[str, Any]) -> None:
        counted.append(record)
        add(self, record)

    monkeypatch.setattr(data, "read_records", read_spy)
    monkeypatch.setattr(DialogueMix, "add", add_spy)
    scan_dialogues(store, RUN)
    # each shard is read once its predecessor is counted: one shard's records at a time
    assert reads == [(f"runs/{RUN}/verify/part-{n:05d}.parquet", 2 * n) for n in range(3)]
    assert len(counted) == 6


def test_mix_reads_optional_fields_as_they_come() -> None:
    mix = DialogueMix()
    mix.add({"mode": "parallel", "target_mode": "parallel", "complexity": 2.5, "cluster": {"id": 7, "label": "weather"}})
    mix.add({"mode": "single", "target_mode": "parallel", "complexity": "high", "cluster": 3})
    mix.add({"mode": "single", "complexity": True, "cluster": [3, 5, 3],
             "source_tools": [{"id": "a"}, {"id": "a"}, {"name": "no id"}]})
    assert mix.target_vs_shown == {("parallel", "parallel"): 1, ("parallel", "single"): 1}
    assert mix.complexity == {2.5: 1}
    assert (mix.complexity_unreadable, mix.with_complexity) == (2, 3)
    assert mix.clusters == {"weather": 1, "3": 2, "5": 1}  # once per record in each of its clusters
    assert mix.with_cluster == 3
    assert mix.source_tools == {"a"}
    assert mix.recipes == {"toolalpaca": 3}  # the Dialogue model's default


def test_usage_by_role_sums_every_attempt(stats_path: Path) -> None:
    stats = load_run_stats(stats_path, RUN)
    shards = {"domains": 1, "tools": 2, "tasks": 2, "dialogues": 2, "verify": 2}
    expected: dict[str, list[int]] = {}
    for stage, roles in ROLES.items():
        for role, numbers in roles.items():
            total = expected.setdefault(role, [0, 0, 0, 0])
            for k, n in enumerate(numbers):
                total[k] += n * shards[stage]
    assert stats.usage_by_role == {role: Usage(*numbers) for role, numbers in expected.items()}
    assert stats.usage == Usage(*(sum(u[k] for u in expected.values()) for k in range(4)))
    assert stats.accepted == 14
    assert stats.profile("tasks", "tool_uses") == {"distinct": 12, "total": 24}
    assert stats.profile("nowhere", "tool_uses") == {}
