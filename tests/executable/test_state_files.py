"""A session's files compared by what they hold: two real DuckDB (and SQLite) files written by the
same statements differ in their bytes and agree in their digest; a changed row changes it."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import asyncio

import duckdb
import pytest

from toolfactory.executable.python_env import PythonEnvironment
from toolfactory.executable.settings import PythonEnvironmentSettings
from toolfactory.executable.state_files import content_digest, files_of
from toolfactory.executable.vetting import vet
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.execution import ExecutionLayer

HERE = Path(__file__).parent
SAVE = Function(name="save", description="Save a note.", parameters={"type": "object", "properties": {"text": {"type": "string"}}})

STATEMENTS = ["CREATE TABLE notes (id INTEGER, body VARCHAR)", "INSERT INTO notes VALUES (1, 'buy milk'), (2, 'call Ada')"]


def duckdb_file(path: Path, extra: str | None = None) -> Path:
    with duckdb.connect(str(path)) as conn:
        for statement in [*STATEMENTS, *([extra] if extra else [])]:
            conn.execute(statement)
    return path


def sqlite_file(path: Path, extra: str | None = None) -> Path:
    with sqlite3.connect(path) as conn:
        for statement in [*STATEMENTS, *([extra] if extra else [])]:
            conn.execute(statement)
    conn.close()
    return path


def test_two_duckdb_files_of_the_same_statements_differ_in_bytes_and_agree_in_content(tmp_path: Path) -> None:
    first, second = duckdb_file(tmp_path / "a.duckdb"), duckdb_file(tmp_path / "b.duckdb")
    assert hashlib.sha256(first.read_bytes()).digest() != hashlib.sha256(second.read_bytes()).digest()
    assert content_digest(first) == content_digest(second)
    assert content_digest(first).startswith("duckdb:")
    changed = duckdb_file(tmp_path / "c.duckdb", "UPDATE notes SET body = 'buy bread' WHERE id = 1")
    assert content_digest(changed) != content_digest(first)


def test_a_duckdb_file_held_open_by_its_writer_is_read_from_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "held.duckdb"
    conn = duckdb.connect(str(path))
    try:
        for statement in STATEMENTS:
            conn.execute(statement)
        held = content_digest(path)
    finally:
        conn.close()
    assert held == content_digest(duckdb_file(tmp_path / "fresh.duckdb"))


def test_sqlite_files_are_compared_by_their_dump(tmp_path: Path) -> None:
    first, second = sqlite_file(tmp_path / "a.db"), sqlite_file(tmp_path / "b.db")
    assert content_digest(first) == content_digest(second) and content_digest(first).startswith("sqlite:")
    assert content_digest(sqlite_file(tmp_path / "c.db", "DELETE FROM notes WHERE id = 2")) != content_digest(first)


def test_json_is_compared_by_value_and_other_files_by_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"b": 1, "a": [1, 2]}))
    (tmp_path / "b.json").write_text(json.dumps({"a": [1, 2], "b": 1}, indent=2))
    (tmp_path / "c.txt").write_text("plain")
    found = files_of(tmp_path)
    assert found["a.json"] == found["b.json"] and found["a.json"].startswith("json:")
    assert found["c.txt"] == hashlib.sha256(b"plain").hexdigest()


def test_a_database_s_journal_is_part_of_the_database_not_a_file_of_its_own(tmp_path: Path) -> None:
    duckdb_file(tmp_path / "a.duckdb")
    (tmp_path / "a.duckdb.wal").write_bytes(b"")
    assert list(files_of(tmp_path)) == ["a.duckdb"]


def test_vetting_finds_a_state_two_identical_sessions_disagree_on_and_the_replay_does_not_compare_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE))
    stamped = PythonEnvironmentSettings(name="stamped", class_path="toolenvs:Stamped", deterministic=True)
    card = asyncio.run(vet(PythonEnvironment(stamped), timeout_seconds=240))
    assert card.failure is None and card.state_reproducible is False
    assert asyncio.run(vet(PythonEnvironment(PythonEnvironmentSettings(name="c", class_path="toolenvs:Counter")),
                           timeout_seconds=240)).state_reproducible is True

    async def made() -> tuple[str, object]:
        async with PythonEnvironment(stamped).session() as session:
            answer = await session.call("save", {"text": "hello"})
            return answer.content, await session.state()

    answer, state = asyncio.run(made())
    call = ToolCall(id="call_0", name="save", arguments='{"text": "hello"}')
    messages = [Message(role="user", content="Save hello."), Message(role="assistant", tool_calls=[call]),
                Message(role="tool", tool_call_id="call_0", name="save", content=answer), Message(role="assistant", content="Saved.")]
    execution = {"calls": [{"source": "stamped", "name": "save", "arguments": call.arguments, "is_error": False, "truncated": False}],
                 "states": {"stamped": state}}
    layer = ExecutionLayer({"stamped": (PythonEnvironment(stamped), stamped)})

    def codes(extra: dict[str, object]) -> list[str]:
        record = Dialogue(id="d", task_id="t", tools=[SAVE], messages=messages, recipe="toolace",
                          generation={"execution": {**execution, **extra}})
        return sorted(v.code for v in asyncio.run(layer.verdicts(record)))

    assert codes({}) == ["exec_state_mismatch"]  # the time in the state differs on every replay
    assert codes({"state_unreproducible": ["stamped"]}) == []  # as vetting finds it: not compared; the result still is
