"""The one line a stage's sub-flow ends with when some of its shards did not complete."""

from __future__ import annotations

from flows.execute import stage_failure


def test_failed_shards_are_counted_among_the_stage_total_not_added_to_it() -> None:
    message = stage_failure("dialogues", 10, failed=[7, 2], blocked=[], not_started=[])
    assert message == "dialogues: 2 failed [2, 7] of 10 shard(s) (8 completed)"


def test_blocked_and_not_started_shards_are_named_with_the_failed_ones() -> None:
    message = stage_failure("verify", 10, failed=[1], blocked=[4, 3], not_started=[9])
    assert message == "verify: 1 failed [1], 2 blocked [3, 4], 1 not started [9] of 10 shard(s) (6 completed)"


def test_a_stage_whose_shards_all_completed_has_no_failure_line() -> None:
    assert stage_failure("tasks", 4, failed=[], blocked=[], not_started=[]) is None
