"""Verify from the record and with --live: a dataset whose MCP server is gone is checked from
the record; `--live` replays it for real, and says which source cannot start; a record edited
after the run is rejected from the record; a server whose answers changed with its version is
drift on a live replay. The records are made as the dialogues stage makes them: each call runs on
a real MCP server over stdio (a small one whose answers and version its environment sets) or
on a Python environment, through the stage's own execution."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.config import Config, validate_config
from toolfactory.models import Dialogue, Message, Task, Tool, ToolCall
from toolfactory.stages import ShardContext, ShardSpec
from toolfactory.stages.dialogues.execution import DialogueExecution
from toolfactory.stages.tools.executable import import_executable
from toolfactory.stages.verify.execution import ExecutionLayer, SourceUnavailable
from toolfactory.stages.verify.stage import CHECKED_FROM_RECORD, REPLAYED_LIVE, VerifyStage

HERE = Path(__file__).parent
SERVER = HERE / "quote_mcp_server.py"


@pytest.fixture(autouse=True)
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def quotes(price: str = "10", version: str = "1.0", command: str = sys.executable) -> dict[str, Any]:
    return {"name": "quotes", "command": command, "args": [str(SERVER)], "env": {"QUOTE_PRICE": price, "QUOTE_VERSION": version},
            "deterministic": True, "vet": False}


def counter(**overrides: Any) -> dict[str, Any]:
    return {"name": "counter", "class_path": "toolenvs:Counter", "initial_state": {"start": 10}, "deterministic": True,
            "vet": False, **overrides}


def config(mcp: list[dict[str, Any]] = (), environments: list[dict[str, Any]] = (), **verify: Any) -> Config:  # type: ignore[assignment]
    return validate_config({"tools": {"mcp": list(mcp), "environments": list(environments)}, "verify": {"judges": [], **verify}})


def executed(cfg: Config, source: str, calls: list[tuple[str, dict[str, Any]]], record_id: str = "d") -> Dialogue:
    """A dialogue whose calls ran on `source` through the dialogues stage's execution, recorded as it records them."""
    tools = [t for t in asyncio.run(import_executable(source, cfg.tools)).records if isinstance(t, Tool)]
    task = Task(id=f"task-{record_id}", tools=tools, instruction="Work it out.")

    async def run() -> tuple[list[Message], dict[str, Any] | None]:
        messages = [Message(role="user", content="Work it out.")]
        async with DialogueExecution(task, cfg.tools) as live:
            for i, (name, arguments) in enumerate(calls):
                tool = task.tool_for(name)
                assert tool is not None, name
                call = ToolCall(id=f"call_{i}", name=name, arguments=json.dumps(arguments))
                result = await live.respond(tool, next(f for f in tool.functions if f.name == name), call)
                messages += [Message(role="assistant", tool_calls=[call]),
                             Message(role="tool", tool_call_id=call.id, name=name, content=result.content)]
            return messages + [Message(role="assistant", content="Done.")], await live.metadata()

    messages, execution = asyncio.run(run())
    assert execution is not None
    return Dialogue(id=record_id, task_id=task.id, tools=[fn for t in tools for fn in t.functions], messages=messages,
                    recipe="toolace", generation={"execution": execution})


def write(path: Path, *dialogues: Dialogue) -> Path:
    path.write_text("".join(d.model_dump_json() + "\n" for d in dialogues))
    return path


def config_file(path: Path, cfg: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def record_codes(dialogue: Dialogue, cfg: Config | None = None) -> list[str]:
    configured = {}
    if cfg is not None:
        from toolfactory.executable.registry import environments, source_settings

        built = environments(cfg.tools)
        configured = {name: (built[name], s) for name, s in source_settings(cfg.tools).items()}
    layer = ExecutionLayer(configured, mode="record")
    return sorted(v.code for v in asyncio.run(layer.verdicts(dialogue)))


def live_codes(dialogue: Dialogue, cfg: Config) -> list[str]:
    from toolfactory.executable.registry import environments, source_settings

    built = environments(cfg.tools)
    layer = ExecutionLayer({name: (built[name], s) for name, s in source_settings(cfg.tools).items()}, mode="live")
    return sorted(v.code for v in asyncio.run(layer.verdicts(dialogue)))


@pytest.fixture(scope="module")
def quoted() -> Dialogue:
    """Two calls that ran on the quote server, version 1.0, price 10."""
    return executed(config([quotes()]), "quotes", [("quote", {"symbol": "ACME"}), ("quote", {"symbol": "INIT"})])


def test_the_record_keeps_a_digest_of_what_each_call_answered(quoted: Dialogue) -> None:
    recorded = quoted.generation["execution"]["calls"]
    assert [c["name"] for c in recorded] == ["quote", "quote"] and all(len(c["result_sha256"]) == 64 for c in recorded)
    assert quoted.generation["execution"]["versions"] == {"quotes": "quotes 1.0"}
    assert record_codes(quoted) == []


def test_a_dataset_whose_server_is_gone_is_checked_from_the_record_and_live_names_the_source(quoted: Dialogue, tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", quoted)
    gone = config_file(tmp_path / "gone.yaml", {"tools": {"mcp": [quotes(command=str(tmp_path / "no-such-quote-server"))]}})
    runner = CliRunner()

    checked = runner.invoke(app, ["verify", str(data), "--format", "toolfactory", "--out", str(tmp_path / "r"), "--config", gone])
    assert checked.exit_code == 0, checked.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert (report["accepted"], report["rejected"]) == (1, 0)
    assert report["execution"] == {"mode": "record", "sources": {"quotes": {"live": 0, "from_record": 1, "drifted": 0}},
                                   "unavailable": {}}
    assert "executed calls of quotes: 0 records replayed live, 1 checked from the record" in checked.output
    assert "checked from the record, nothing run" in (tmp_path / "r" / "report.md").read_text()

    live = runner.invoke(app, ["verify", str(data), "--format", "toolfactory", "--out", str(tmp_path / "l"), "--config", gone, "--live"])
    assert live.exit_code == 2
    [line] = live.stderr.splitlines()
    assert line.startswith("error: --live: source 'quotes' (named by record 'd') cannot start: "), line
    assert "no-such-quote-server" in line

    unconfigured = runner.invoke(app, ["verify", str(data), "--format", "toolfactory", "--out", str(tmp_path / "u"), "--live"])
    assert unconfigured.exit_code == 2
    assert "source 'quotes'" in unconfigured.stderr and "--config FILE" in unconfigured.stderr, unconfigured.stderr


def test_live_replays_for_real_and_tells_drift_from_a_changed_answer(quoted: Dialogue, tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", quoted)
    runner = CliRunner()

    def live(name: str, price: str, version: str) -> dict[str, Any]:
        cfg = config_file(tmp_path / f"{name}.yaml", {"tools": {"mcp": [quotes(price, version)]}})
        result = runner.invoke(app, ["verify", str(data), "--format", "toolfactory", "--out", str(tmp_path / name), "--config", cfg, "--live"])
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / name / "report.json").read_text())

    same = live("same", "10", "1.0")
    assert (same["accepted"], same["execution"]["sources"]) == (1, {"quotes": {"live": 1, "from_record": 0, "drifted": 0}})
    upgraded = live("upgraded", "12", "1.1")  # another version that answers otherwise: the source drifted
    assert upgraded["rules"] == {"exec_source_drifted": 1}
    assert upgraded["execution"]["sources"] == {"quotes": {"live": 1, "from_record": 0, "drifted": 1}}
    changed = live("changed", "12", "1.0")  # the same version answering otherwise: the record is wrong
    assert changed["rules"] == {"exec_result_mismatch": 1} and changed["execution"]["sources"]["quotes"]["drifted"] == 0
    # From the record, none of this shows: the record is consistent with itself.
    assert record_codes(quoted) == []


def test_a_result_edited_after_the_run_is_rejected_from_the_record(quoted: Dialogue) -> None:
    edited = quoted.model_copy(deep=True)
    edited.messages[2].content = json.dumps({"symbol": "ACME", "price": 99.0})
    assert record_codes(edited) == ["exec_record_inconsistent"]
    layer = ExecutionLayer({}, mode="record")
    [verdict] = asyncio.run(layer.verdicts(edited))
    assert verdict.path == "messages[1].tool_calls[0]" and "digest differs" in verdict.message, verdict.message


def test_a_call_dropped_from_the_record_or_from_the_dialogue_is_rejected_from_the_record(quoted: Dialogue) -> None:
    dropped = quoted.model_copy(deep=True)
    del dropped.generation["execution"]["calls"][1]
    [verdict] = asyncio.run(ExecutionLayer({}, mode="record").verdicts(dropped))
    assert verdict.code == "exec_record_inconsistent" and verdict.path == "messages[3].tool_calls[0]"
    assert "lists no such call as run" in verdict.message
    unshown = quoted.model_copy(deep=True)
    del unshown.messages[3:5]  # the dialogue edited: a call the record says ran is no longer shown
    [verdict] = asyncio.run(ExecutionLayer({}, mode="record").verdicts(unshown))
    assert verdict.code == "exec_record_inconsistent" and verdict.path == "generation.execution.calls[1]"
    lost = quoted.model_copy(deep=True)
    del lost.generation["execution"]["states"]["quotes"]
    assert record_codes(lost) == ["exec_record_inconsistent"]


def test_an_error_flag_against_the_source_s_convention_and_an_unrecovered_error_show_in_the_record() -> None:
    cfg = config(environments=[counter()])
    made = executed(cfg, "counter", [("add", {"amount": 5}), ("divide", {"by": 0})])
    assert made.generation["execution"]["calls"][1]["is_error"] is True
    assert record_codes(made, cfg) == ["exec_error_unrecovered"]  # judged on the record as on a replay
    flagged = executed(cfg, "counter", [("add", {"amount": 5})])
    flagged.generation["execution"]["calls"][0]["is_error"] = True  # {"value": 15} is no error of a Python environment
    assert record_codes(flagged, cfg) == ["exec_error_unrecovered", "exec_record_inconsistent"]
    # Without the source's settings its convention is unknown: only what the record says is judged.
    assert record_codes(flagged) == ["exec_error_unrecovered"]


def test_a_recorded_final_state_that_is_not_the_target_is_a_state_mismatch_from_the_record() -> None:
    cfg = config(environments=[counter()])
    made = executed(cfg, "counter", [("add", {"amount": 5})])
    made.generation["execution"]["target_state"] = json.loads(json.dumps(made.generation["execution"]["states"]))
    assert record_codes(made) == []
    made.generation["execution"]["target_state"]["counter"]["value"] = 20
    [code] = record_codes(made)
    assert code == "exec_state_mismatch"


def test_the_verify_stage_replays_and_falls_back_to_the_record_where_a_source_cannot_start(quoted: Dialogue, tmp_path: Path) -> None:
    def run(cfg: Config) -> Any:
        ctx = ShardContext(config=cfg, run_id="r", gateway=None)  # type: ignore[arg-type]
        return asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [quoted.model_dump()], ctx))

    replayed = run(config([quotes()]))
    assert [d.id for d in replayed.records] == ["d"]  # type: ignore[attr-defined]
    assert replayed.profile[REPLAYED_LIVE] == {"quotes": 1} and CHECKED_FROM_RECORD not in replayed.profile
    gone = [quotes(command=str(tmp_path / "no-such-quote-server"))]
    fallen_back = run(config(gone))
    assert [d.id for d in fallen_back.records] == ["d"]  # type: ignore[attr-defined]
    assert fallen_back.profile[CHECKED_FROM_RECORD] == {"quotes": 1} and REPLAYED_LIVE not in fallen_back.profile
    strict = run(config(gone, execution_unavailable="reject"))
    assert [(r.id, r.reasons) for r in strict.rejected] == [("d", ["exec_start_failed"])]


def test_a_live_layer_that_must_not_fall_back_raises_naming_the_source(quoted: Dialogue, tmp_path: Path) -> None:
    from toolfactory.executable.registry import environments, source_settings

    cfg = config([quotes(command=str(tmp_path / "gone"))])
    built = environments(cfg.tools)
    layer = ExecutionLayer({n: (built[n], s) for n, s in source_settings(cfg.tools).items()}, unavailable="raise")
    with pytest.raises(SourceUnavailable) as raised:
        asyncio.run(layer.verdicts(quoted))
    assert raised.value.source == "quotes" and raised.value.record_id == "d"
    assert live_codes(quoted, config([quotes()])) == []


def test_an_answer_that_is_an_error_by_the_source_s_learnt_convention_is_recorded_replayed_and_checked_as_one() -> None:
    # The ledger answers a failed deposit with the text "Ledger error: …", not an exception:
    # vetting learns that label, and the dialogue's record, its replay and its check agree.
    cfg = config(environments=[{"name": "ledger", "class_path": "ledger_env:Ledger"}])
    failed = executed(cfg, "ledger", [("deposit", {"account": "bob", "amount": 5})])
    execution = failed.generation["execution"]
    assert execution["calls"][0]["is_error"] is True
    assert "Ledger error" in execution["error_conventions"]["ledger"]["labels"]
    assert record_codes(failed, cfg) == ["exec_error_unrecovered"]
    assert live_codes(failed, cfg) == ["exec_error_unrecovered"]
    recovered = executed(cfg, "ledger", [("deposit", {"account": "bob", "amount": 5}), ("deposit", {"account": "alice", "amount": 5})])
    assert [call["is_error"] for call in recovered.generation["execution"]["calls"]] == [True, False]
    assert record_codes(recovered, cfg) == [] and live_codes(recovered, cfg) == []
    # A record that calls the learnt error a success is caught from the record.
    hidden = failed.model_copy(deep=True)
    hidden.generation["execution"]["calls"][0]["is_error"] = False
    assert "exec_record_inconsistent" in record_codes(hidden, cfg)
