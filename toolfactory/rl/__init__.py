"""Verifiable tasks as RL environments: a run's ``tasks`` export loaded by RL libraries' own
loaders, its calls run on the real sources, its reward the verifier's execution verdict.

The library adapters (:mod:`toolfactory.rl.verifiers_env`, :mod:`toolfactory.rl.skyrl_env`) are
not imported here: they need the ``rl`` extra.
"""

from __future__ import annotations

from toolfactory.rl.episode import Episode
from toolfactory.rl.reward import Score, Trajectory, score
from toolfactory.rl.tasks import Task, read_tasks, task_of_record, write_tasks

__all__ = ["Episode", "Score", "Task", "Trajectory", "read_tasks", "score", "task_of_record", "write_tasks"]
