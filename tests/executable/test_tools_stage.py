"""Executable sources in the tools and pool stages: one shard per source, checked tools, a
source that cannot start rejected alone, tools kept apart from the tools an LLM plays."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import Config, validate_config
from toolfactory.errors import ConfigError
from toolfactory.executable.session import executable_source
from toolfactory.models import Tool
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.base import Planning
from toolfactory.stages.pool.stage import PoolStage
from toolfactory.stages.tools.stage import ToolsStage

HERE = Path(__file__).parent


@pytest.fixture
def envs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def config(tmp_path: Path, *environments: dict[str, Any]) -> Config:
    return validate_config({"storage": {"root": str(tmp_path)}, "tools": {"environments": list(environments)}})


def tools_shard(cfg: Config, name: str) -> StageOutput:
    ctx = ShardContext(config=cfg, run_id="r", gateway=None)  # type: ignore[arg-type]
    return asyncio.run(ToolsStage().run(ShardSpec("tools", 0, (), {"executable": name}), [], ctx))


def test_each_executable_source_is_one_tools_shard(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"name": "files", "preset": "GorillaFileSystem"}, {"name": "math", "preset": "MathAPI"})
    specs = ToolsStage().plan(Planning(cfg, "r", {"sources": [], "documents": []}))
    n = len(specs) - 2  # the synthesis shards come first
    assert [(s.index, s.inputs, s.params) for s in specs[n:]] == [(n, (), {"executable": "files"}), (n + 1, (), {"executable": "math"})]
    assert [s.index for s in specs] == list(range(len(specs)))


def test_the_shard_imports_the_source_s_tools_marked_and_filtered(tmp_path: Path) -> None:
    out = tools_shard(config(tmp_path, {"name": "files", "preset": "GorillaFileSystem", "deny": ["rm", "rmdir"]}), "files")
    [tool] = out.records
    assert isinstance(tool, Tool) and executable_source(tool) == "files"
    names = {fn.name for fn in tool.functions}
    assert len(names) == 16 and {"ls", "cd", "mkdir"} <= names and not names & {"rm", "rmdir"}
    assert out.profile["executable_functions_filtered"] == {"files": 2} and not out.rejected


def test_a_source_that_cannot_start_is_one_rejection_and_no_failure(tmp_path: Path, envs_on_path: None) -> None:
    cfg = config(tmp_path, {"name": "broken", "class_path": "toolenvs:Counter", "initial_state": {"nope": 1}})
    out = tools_shard(cfg, "broken")
    assert not out.records and [r.reasons for r in out.rejected] == [["exec_start_failed"]]
    assert "nope" in out.rejected[0].detail


def test_a_documented_function_the_class_lacks_is_rejected_and_the_others_kept(tmp_path: Path, envs_on_path: None) -> None:
    docs = tmp_path / "docs.json"
    documented = [
        {"name": "add", "description": "Add.", "parameters": {"type": "dict", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}},
        {"name": "subtract", "description": "Subtract.", "parameters": {"type": "dict", "properties": {}}},
        {"name": "divide", "description": "", "parameters": {"type": "dict", "properties": {"by": {"type": "float"}}}},
    ]
    docs.write_text("\n".join(json.dumps(doc) for doc in documented))
    out = tools_shard(config(tmp_path, {"name": "c", "class_path": "toolenvs:Counter", "function_docs": str(docs)}), "c")
    [tool] = out.records
    assert isinstance(tool, Tool) and [fn.name for fn in tool.functions] == ["add"]
    assert sorted(r.reasons[0] for r in out.rejected) == ["exec_function_missing", "tool_missing_description"]


def test_two_sources_with_one_name_are_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environments.1.name: 'x' names another executable source too"):
        config(tmp_path, {"name": "x", "preset": "MathAPI"}, {"name": "x", "preset": "TicketAPI"})


def test_the_pool_keeps_executable_tools_apart_and_unchanged(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    [tool] = tools_shard(config(tmp_path, {"name": "files", "preset": "GorillaFileSystem"}), "files").records
    assert isinstance(tool, Tool)
    played = tool.model_copy(update={"id": "played", "source": "catalog", "provenance": {}})  # the same API, played by an LLM
    ctx = ShardContext(config=cfg, run_id="r", gateway=None)  # type: ignore[arg-type]
    out = asyncio.run(PoolStage().run(ShardSpec("pool", 0, (), {}), [played.model_dump(), tool.model_dump()], ctx))
    assert not out.rejected and len(out.records) == 2
    kept = next(t for t in out.records if isinstance(t, Tool) and executable_source(t) == "files")
    assert kept.provenance["pool"] == "executable"
    assert kept.model_dump(exclude={"provenance"}) == tool.model_dump(exclude={"provenance"})


def test_a_vetted_source_admits_the_tools_that_work_here_and_keeps_its_card_for_the_next_run(
        tmp_path: Path, envs_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfactory.storage import ObjectStore

    monkeypatch.setenv("PYTHONPATH", str(HERE))
    cfg = config(tmp_path, {"name": "probed", "class_path": "toolenvs:Probed", "call_timeout_seconds": 2})
    store = ObjectStore.open(cfg.storage)

    def shard() -> StageOutput:
        ctx = ShardContext(config=cfg, run_id="r", gateway=None, store=store)  # type: ignore[arg-type]
        return asyncio.run(ToolsStage().run(ShardSpec("tools", 0, (), {"executable": "probed"}), [], ctx))

    out = shard()
    [tool] = out.records
    assert isinstance(tool, Tool) and sorted(fn.name for fn in tool.functions) == ["read", "roll", "save"]
    assert sorted(r.reasons[0] for r in out.rejected) == [
        "tool_errors_on_every_probe", "tool_fails_its_session", "tool_needs_credentials", "tool_needs_network"]
    vetting = tool.provenance["vetting"]
    assert vetting["functions"]["roll"]["deterministic"] is False and vetting["functions"]["save"]["deterministic"] is True
    assert out.profile["vetting_cache"] == {"probed: made": 1} and vetting["cached"] is False
    assert [p.rsplit("/", 1)[-1].split("-")[0] for p in store.list("vetting/")] == ["probed"]
    again = shard()  # a later run with the same source: the card is read, nothing is started
    assert again.profile["vetting_cache"] == {"probed: reused": 1}
    assert [fn.name for fn in again.records[0].functions] == [fn.name for fn in tool.functions]
    unvetted = config(tmp_path, {"name": "probed", "class_path": "toolenvs:Probed", "vet": False})
    ctx = ShardContext(config=unvetted, run_id="r", gateway=None)  # type: ignore[arg-type]
    plain = asyncio.run(ToolsStage().run(ShardSpec("tools", 0, (), {"executable": "probed"}), [], ctx))
    assert len(plain.records[0].functions) == 7 and not plain.rejected
