"""What a re-run may change: operational settings are applied, anything else is refused by name."""

from __future__ import annotations

import pytest

from toolfactory.config import load_config
from toolfactory.errors import ConfigError
from toolfactory.run.operational import check_operational, rerun_config


@pytest.mark.fault_matrix
def test_operational_settings_are_applied_to_the_runs_own_config() -> None:
    snapshot = load_config(None, ["tasks.instructions_per_tool=5", "llm.max_retries=0"], environ={}).snapshot()
    config = rerun_config(snapshot, ["llm.max_retries=6", "run.tolerate_transient_failures=0.5", "llm.base_url=http://replica:8000/v1",
                                     "orchestration.task_retries=4", "llm.embedding_backend=local"])
    assert (config.llm.max_retries, config.run.tolerate_transient_failures, config.orchestration.task_retries) == (6, 0.5, 4)
    assert config.llm.base_url == "http://replica:8000/v1" and config.llm.embedding_backend == "local"
    assert config.tasks.instructions_per_tool == 5  # the run's own value, not the default


@pytest.mark.parametrize("override", ["tasks.instructions_per_tool=9", "llm.roles.assistant.model=gpt-4o", "llm.provider=openai-compatible",
                                      "llm.simulator.rate_clarify=0.5", "run.seed=3"])
@pytest.mark.fault_matrix
def test_a_setting_that_changes_what_is_generated_is_refused_by_name(override: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_operational(["storage.root=/data", override])
    message = str(raised.value)
    assert override.partition("=")[0] in message and "storage.root" not in message.split(":")[0]
    assert "llm.max_retries" in message  # the message says what may be changed


@pytest.mark.fault_matrix
def test_an_operational_value_is_still_validated() -> None:
    snapshot = load_config(None, environ={}).snapshot()
    with pytest.raises(ConfigError, match="llm.max_retries"):
        rerun_config(snapshot, ["llm.max_retries=-1"])
