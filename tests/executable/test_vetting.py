"""Vetting: each tool of a real source called with arguments that fit it, and classified by what
it answered (works, needs the network or a key, errors), whether a fresh session answers the
same, and whether it changed the state."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.executable.mcp import McpEnvironment
from toolfactory.executable.mcp.settings import McpSourceSettings
from toolfactory.executable.probes import probe_arguments
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.vetting import ToolCard, vet

HERE = Path(__file__).parent


@pytest.fixture
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE))


def cards(environment: Any) -> dict[str, ToolCard]:
    card = asyncio.run(vet(environment, timeout_seconds=240))
    assert card.failure is None, card.failure
    assert card.start_seconds is not None and card.call_seconds is not None
    return {tool.name: tool for tool in card.tools}


def test_each_kind_of_tool_is_told_apart_by_what_it_answers(envs_on_path: None) -> None:
    found = cards(PythonEnvironment(PythonEnvironmentSettings(name="probed", class_path="toolenvs:Probed",
                                                              call_timeout_seconds=2)))
    assert {name: card.status for name, card in found.items()} == {
        "broken": "errors", "fetch": "needs_network", "forecast": "needs_credentials",
        "read": "works", "roll": "works", "save": "works", "stall": "fails_session"}
    # The hanging tool cost one probe and its session; the tools after it ran in a fresh one.
    assert found["stall"].probes == 1 and found["stall"].answer.startswith("exec_timeout")
    # read needs a note saved first: it works in the second round, with what save answered.
    assert found["read"].probes > 1 and found["read"].arguments == {"index": 1}
    assert found["roll"].deterministic is False and found["save"].deterministic and found["read"].deterministic
    assert found["save"].changes_state and not found["read"].changes_state and not found["roll"].changes_state
    assert "not finished" in found["broken"].answer


def test_bfcl_s_file_system_reads_without_changing_and_writes_with(tmp_path: Path) -> None:
    files = {"root": {"alex": {"type": "directory", "contents": {"notes.txt": {"type": "file", "content": "hello"}}}}}
    found = cards(PythonEnvironment(PythonEnvironmentSettings(name="files", preset="GorillaFileSystem", initial_state=files)))
    for name in ("cat", "ls", "pwd", "wc"):
        assert found[name].status == "works" and found[name].deterministic and found[name].changes_state is False, found[name]
    for name in ("mkdir", "touch"):
        assert found[name].status == "works" and found[name].changes_state, found[name]
    assert found["cat"].arguments == {"file_name": "notes.txt"}  # a name it found in the state


def test_the_time_server_works_offline_with_its_documented_examples_and_the_clock_is_not_deterministic() -> None:
    found = cards(McpEnvironment(McpSourceSettings(name="time", command="mcp-server-time", args=["--local-timezone", "UTC"])))
    now, convert = found["get_current_time"], found["convert_time"]
    assert now.status == convert.status == "works"
    assert now.arguments == {"timezone": "America/New_York"}  # the description's first example
    assert now.deterministic is False and convert.deterministic is True
    assert now.read_only_hint is True and now.changes_state is None and now.hint_honest is None


def test_probe_arguments_fit_the_schema_documented_values_first() -> None:
    schema = {"type": "object", "required": ["zone", "day"], "properties": {
        "zone": {"type": "string", "description": "IANA zone, e.g. 'Europe/Paris' or 'Asia/Tokyo'"},
        "day": {"type": "string", "format": "date"},
        "count": {"type": "integer", "minimum": 5, "maximum": 9},
        "unit": {"type": "string", "enum": ["c", "f"]}}}
    probes = probe_arguments(schema, 3)
    assert probes[0] == {"zone": "Europe/Paris", "day": "2026-01-15"}
    assert {"zone": "Europe/Paris", "day": "2026-01-15", "count": 6, "unit": "c"} in probes
    assert all(set(p) >= {"zone", "day"} and p.get("count", 6) >= 5 for p in probes)
    assert probe_arguments({"type": "object", "properties": {"x": {"type": "string", "pattern": "^[0-9]+$"}},
                            "required": ["x"]}, 3, found=("abc", "42")) == [{"x": "42"}]


def test_a_read_only_hint_that_the_state_belies_is_dishonest() -> None:
    card = ToolCard(name="t", status="works", probes=1, arguments={}, answer="", read_only_hint=True, changes_state=True)
    assert card.hint_honest is False
    assert ToolCard(name="t", status="works", probes=1, arguments={}, answer="", read_only_hint=True,
                    changes_state=False).hint_honest is True


def test_the_command_vets_the_configured_sources_and_writes_their_cards(envs_on_path: None, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("tools:\n  environments:\n    - {name: probed, class_path: 'toolenvs:Probed', call_timeout_seconds: 2}\n  mcp: []\n")
    out = tmp_path / "cards.json"
    result = CliRunner().invoke(app, ["tools", "vet", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "probed: 3 of 7 tools work here, 3 admitted" in result.output
    assert "  fetch: needs_network" in result.output and "  roll: works, not deterministic" in result.output
    [source] = json.loads(out.read_text())["sources"]
    assert source["source"] == "probed" and len(source["tools"]) == 7
    missing = CliRunner().invoke(app, ["tools", "vet", "--config", str(config), "--source", "nope"])
    assert missing.exit_code == 2 and "--source: no executable source 'nope'" in missing.output


def test_a_credential_the_source_s_own_login_tool_gives_does_not_reject_its_tools() -> None:
    # BFCL's Twitter refuses to post before authenticate_twitter: a dialogue logs in first.
    found = cards(PythonEnvironment(PythonEnvironmentSettings(name="twitter", preset="TwitterAPI")))
    post = found["post_tweet"]
    assert post.status == "needs_credentials" and post.refused and post.login_tool == "authenticate_twitter"
    assert post.admitted
    # BFCL's travel API raises ValueError for an unknown route: bad input, a refusal.
    route = cards(PythonEnvironment(PythonEnvironmentSettings(name="travel", preset="TravelAPI")))["get_flight_cost"]
    assert route.status == "errors" and route.answer.startswith("ValueError") and route.admitted
