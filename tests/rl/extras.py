"""The RL libraries these tests run (the `rl` extra, which `make test` installs): a test without
one is skipped with the install hint, and fails under CI, where its absence is a broken set-up."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import _ci


def needs_extra(module: str, extra: str, module_level: bool = False) -> None:
    """Skip (fail under CI) unless `module`, of the extra's package `extra`, is importable."""
    if importlib.util.find_spec(module) is not None:
        return
    reason = f"needs the rl extra ({extra}): make test installs it"
    if _ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)
