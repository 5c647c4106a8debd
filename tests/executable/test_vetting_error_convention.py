"""Vetting learns how a source answers a failed call without flagging it (``Error: …``,
``{"error": …}``) from calls that must fail, keeps it on the card, and counts the probes answered
so as failed: a tool whose every probe was refused so is not ``works``, and a write tool is found
to change the state once a probe can succeed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import _ci
from toolfactory.cli import app
from toolfactory.executable.error_convention import ErrorConvention, InvalidCall, invalid_calls, learn
from toolfactory.executable.mcp import McpEnvironment, McpSourceSettings
from toolfactory.executable.mcp.presets import PRESETS, find_executable
from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.vetting import SourceCard, card_from, provenance, vet, vetted_error_convention
from toolfactory.models import Function, Tool

HERE = Path(__file__).parent
REPO = HERE.parents[1]


def vetted(environment: Any) -> SourceCard:
    card = asyncio.run(vet(environment, timeout_seconds=240))
    assert card.failure is None, card.failure
    return card


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> PythonEnvironment:
    monkeypatch.syspath_prepend(str(HERE))
    return PythonEnvironment(PythonEnvironmentSettings(name="ledger", class_path="ledger_env:Ledger"))


def test_a_tool_answering_its_failures_as_text_is_not_taken_for_working(ledger: PythonEnvironment) -> None:
    card = vetted(ledger)
    tools = {tool.name: tool for tool in card.tools}
    assert card.error_convention.labels == ["Error", "Ledger error"] and card.error_convention.keys == []
    # deposit answered "Ledger error: no account 'accounts'" to the first round: failed; the second
    # round names the account the listing answered, and the deposit changes the state.
    deposit = tools["deposit"]
    assert deposit.status == "works" and deposit.arguments is not None and deposit.arguments["account"] == "alice", deposit
    assert deposit.probes > 1 and deposit.changes_state is True
    # Correct answers that look like a label or an error field stay answers.
    assert tools["echo"].status == "works" and tools["echo"].answer.startswith("Echo: ")
    assert tools["check"].status == "works" and '"error"' in tools["check"].answer
    assert tools["overview"].status == "works" and tools["overview"].changes_state is False


def test_the_command_shows_the_learnt_convention_and_writes_it_on_the_card(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    config = tmp_path / "run.yaml"
    config.write_text("tools:\n  environments:\n    - {name: ledger, class_path: 'ledger_env:Ledger'}\n  mcp: []\n")
    out = tmp_path / "cards.json"
    result = CliRunner().invoke(app, ["tools", "vet", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "  unflagged errors: text starting 'Error:', 'Ledger error:'" in result.output
    [source] = json.loads(out.read_text())["sources"]
    assert source["error_convention"] == {"keys": [], "labels": ["Error", "Ledger error"]}


def test_only_markers_that_say_something_failed_are_learnt_and_keys_only_from_calls_that_break_the_schema() -> None:
    broke = InvalidCall("t", {}, "wrong_type")
    named = InvalidCall("t", {"x": "(no such value)"}, "names_nothing")
    convention = learn([
        (broke, "Echo: hello", None),                       # a label that says nothing failed
        (broke, "Note: the call is noted", None),
        (named, 'Database error: near "x": syntax error', None),
        (named, '{"valid": false, "error": "Expecting value"}', None),  # a checker's correct answer
        (broke, "", {"booking_status": False, "error": "Invalid access token", "message": "no"}),
        (broke, "[{'result': 3}]", None),
    ])
    assert convention.labels == ["Database error"] and convention.keys == ["error"]
    assert convention.matches('Database error: no such table: t')
    assert not convention.matches("Database: 3 tables")  # another label
    assert not convention.matches("The database error log is empty")  # a sentence, not a label
    assert convention.matches("", [{"error": "User not authenticated"}])  # a list of error objects
    assert convention.matches("{'booking_status': False, 'error': 'Invalid access token'}")  # a Python literal
    assert not convention.matches('{"error": ""}') and not convention.matches('{"result": 3}')
    assert not learn([]) and not ErrorConvention().matches("Error: x")  # a source that flags its errors


def test_the_calls_that_must_fail_break_each_tool_s_schema_and_call_a_tool_that_is_not_listed() -> None:
    schema = {"type": "object", "required": ["query", "unit"], "properties": {
        "query": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}, "limit": {"type": "integer"}}}
    calls = invalid_calls([Function(name="no_such_tool", description="", parameters=schema)])
    assert [(c.name, c.why) for c in calls] == [("no_such_tool_2", "unknown_tool"), ("no_such_tool", "missing_required"),
                                                ("no_such_tool", "wrong_type"), ("no_such_tool", "outside_enum"),
                                                ("no_such_tool", "names_nothing")]
    wrong = calls[2].arguments
    assert not isinstance(wrong["query"], str) and wrong["unit"] not in ("c", "f") and "limit" not in wrong
    assert calls[3].arguments["unit"] == "(no such value)" and calls[4].arguments == {"query": "(no such value)", "unit": "c"}


def test_an_old_card_without_a_convention_still_loads_and_a_new_one_keeps_it() -> None:
    old = {"source": "s", "start_seconds": 1.0, "call_seconds": 0.01, "memory_mb": 30.0, "failure": None, "warm": True,
           "reset_seconds": 0.1, "state_reproducible": True,
           "tools": [{"name": "t", "status": "works", "probes": 1, "arguments": {}, "answer": "ok", "hint_honest": None}]}
    card = card_from(old)
    assert not card.error_convention and card.tools[0].status == "works"
    card.error_convention = ErrorConvention(keys=["error"], labels=["Error"])
    again = card_from(json.loads(json.dumps(card.to_dict())))
    assert again.error_convention == card.error_convention
    tool = Tool(name="s", description="", functions=[], provenance={"vetting": provenance(again, cached=True)})
    assert vetted_error_convention(tool).matches("Error: no such table")


# --- the real sources: mcp-server-sqlite (make mcp-servers) and BFCL's travel API -----------------

def _missing(reason: str) -> None:
    if _ci():
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def shop(monkeypatch: pytest.MonkeyPatch) -> McpEnvironment:
    monkeypatch.chdir(REPO)  # the preset finds its program in build/mcp-servers
    entry = PRESETS["sqlite"]
    if find_executable(entry.executable) is None:
        _missing(f"{entry.executable} is not installed (make mcp-servers): {entry.install}")
    return McpEnvironment(McpSourceSettings(name="shop", preset="sqlite"))


def test_the_sql_server_s_text_errors_are_learnt_and_its_write_tools_change_the_state(shop: McpEnvironment) -> None:
    card = vetted(shop)
    tools = {tool.name: tool for tool in card.tools}
    # It answers a refused or failing statement as text, never flagged: "Error: …", "Database error: …".
    assert set(card.error_convention.labels) == {"Error", "Database error"}, card.error_convention
    for name in ("write_query", "create_table"):
        assert tools[name].status == "works" and tools[name].changes_state is True, tools[name]
        assert not tools[name].answer.startswith(("Error", "Database error")), tools[name]
    for name in ("read_query", "list_tables", "describe_table"):
        assert tools[name].status == "works" and tools[name].changes_state is False, tools[name]
    assert tools["read_query"].deterministic and tools["write_query"].deterministic


def test_the_learnt_convention_tells_the_sql_server_s_unflagged_errors_from_its_answers(shop: McpEnvironment) -> None:
    convention = vetted(shop).error_convention

    async def answers() -> list[Any]:
        async with shop.session() as session:
            return [await session.call("write_query", {"query": "hello"}),
                    await session.call("create_table", {"query": "hello"}),
                    await session.call("list_tables", {}),
                    await session.call("read_query", {"query": "SELECT name FROM customers WHERE id = 1"})]

    bad_write, bad_create, listing, read = asyncio.run(answers())
    assert not bad_write.is_error and not bad_create.is_error  # what the server flags: nothing
    assert convention.matches(bad_write.content, bad_write.structured) and convention.matches(bad_create.content)
    assert not convention.matches(listing.content) and not convention.matches(read.content)


def test_bfcl_s_travel_writes_refused_for_want_of_a_token_are_not_taken_for_working() -> None:
    import importlib.util

    from toolfactory.executable.settings import BFCL_INSTALL, BFCL_PACKAGE

    if importlib.util.find_spec(BFCL_PACKAGE) is None:
        _missing(f"BFCL's environments need bfcl-eval: {BFCL_INSTALL}")
    card = vetted(PythonEnvironment(PythonEnvironmentSettings(name="travel", preset="TravelAPI")))
    tools = {tool.name: tool for tool in card.tools}
    # {"booking_status": false, "error": "Invalid access token"}: an error field beside others.
    assert card.error_convention.keys == ["error"]
    for name in ("book_flight", "cancel_booking", "purchase_insurance"):
        tool = tools[name]
        assert tool.status == "needs_credentials" and tool.refused and tool.login_tool == "authenticate_travel", tool
        assert tool.admitted  # a dialogue logs in first
    for name in ("list_all_airports", "get_nearest_airport_by_city", "get_budget_fiscal_year"):
        assert tools[name].status == "works" and tools[name].changes_state is False, tools[name]
