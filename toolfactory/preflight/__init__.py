"""Preflight: before any paid work, one small request of each kind a run will send, per role.

It tells a first run against a real endpoint what works before the run spends anything on it,
chooses the modes left `auto` (recorded in the run's manifest, so its shards and re-runs use
them), and fails with one message naming the config field to change (`toolfactory check`, and
the start of every `run` and `rerun`).
"""

from toolfactory.preflight.check import Preflight, check_endpoint
from toolfactory.preflight.choices import apply_choices
from toolfactory.preflight.needs import Needs, run_needs
from toolfactory.preflight.probes import Probe

__all__ = ["Needs", "Preflight", "Probe", "apply_choices", "check_endpoint", "run_needs"]
