"""Each format, exported from the valid corpus and read back with the consumer's reader — the
repo's format readers, ToolBench's ReAct parser, LLaMA-Factory's ShareGPT rules — gives the
same calls, responses and final answers as the canonical dialogues."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from toolfactory.export import SPLITS, SplitSpec, export_run, record_split
from toolfactory.export.toolbench import file_name as toolbench_file_name
from toolfactory.formats import openai as openai_reader
from toolfactory.formats import sharegpt as sharegpt_reader
from toolfactory.formats import toolalpaca as toolalpaca_reader
from toolfactory.formats import toolbench as toolbench_reader
from toolfactory.formats import xlam as xlam_reader
from toolfactory.models import Dialogue, Message
from toolfactory.render.calls_react import parse_turn
from toolfactory.storage.shards import write_rows
from toolfactory.definitions.convert import normalize_schema
from toolfactory.storage import ObjectStore

from .helpers import RUN, by_id, calls, final_answer, open_store, pool, read_jsonl, write_run


def expected(dialogues: list[Dialogue], keep: Callable[[Dialogue], bool] = lambda d: True) -> dict[str, list[Dialogue]]:
    """The records each split file must hold, in order (the export keeps input order)."""
    out: dict[str, list[Dialogue]] = {s: [] for s in SPLITS}
    for dialogue in dialogues:
        if keep(dialogue):
            out[record_split(dialogue, SplitSpec(), 0)[0]].append(dialogue)
    return out


def users(dialogue: Dialogue) -> int:
    return sum(1 for m in dialogue.messages if m.role == "user")


def read_all(reader: Callable[[Path], object], path: Path) -> list[Dialogue]:
    items = list(reader(path))  # type: ignore[call-overload]
    assert all(isinstance(item, Dialogue) for item in items), [i for i in items if not isinstance(i, Dialogue)][:3]
    return items


def test_openai_reads_back_message_for_message(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "openai", tmp_path)
    assert summary["skipped"] == {} and summary["exported"] == len(dialogues)
    for split, want in expected(dialogues).items():
        got = read_all(openai_reader.read, tmp_path / f"{split}.jsonl")
        assert len(got) == len(want)
        for original, back in zip(want, got):
            strip = {"reasoning", "name"}  # reasoning is not exported by default; OpenAI's tool turns have no name
            # a path the export ends with ToolLLM's Finish call reads back closed: Finish's response and the answer
            assert [m.model_dump(exclude=strip) for m in back.messages] == [m.model_dump(exclude=strip) for m in original.messages]
            assert [(f.name, f.description, f.parameters) for f in back.tools] == [(f.name, f.description, f.parameters) for f in original.tools]
    line = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[0])
    assert set(line) == {"messages", "tools"}
    assert all("reasoning" not in json.dumps(m) for m in line["messages"])


def test_openai_exports_reasoning_only_when_asked(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    from toolfactory.export import ExportOptions

    export_run(run_store, RUN, "openai", tmp_path, options=ExportOptions(include_reasoning=True))
    back = [d for s in SPLITS for d in read_all(openai_reader.read, tmp_path / f"{s}.jsonl")]
    thoughts = sum(1 for d in dialogues for m in d.messages if m.reasoning)
    assert thoughts and sum(1 for d in back for m in d.messages if m.reasoning) == thoughts


def test_sharegpt_follows_llama_factory_rules(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "sharegpt", tmp_path)
    assert summary["skipped"] == {}
    for split, want in expected(dialogues).items():
        rows = read_jsonl(tmp_path / f"{split}.jsonl")
        assert len(rows) == len(want)
        for original, row in zip(want, rows):
            assert set(row) == {"conversations", "system", "tools"} and isinstance(row["tools"], str)
            turns = row["conversations"]
            # SharegptDatasetConverter: odd positions human/observation, even gpt/function_call, even count
            assert all(t["from"] in (("human", "observation"), ("gpt", "function_call"))[n % 2] for n, t in enumerate(turns))
            assert len(turns) % 2 == 0
            got_calls = [(json.loads(t["value"])["name"], json.loads(t["value"])["arguments"]) for t in turns if t["from"] == "function_call"]
            assert got_calls == [(name, json.loads(arguments)) for name, arguments in calls(original, finish=True)]
            # one observation per call result, the response text as the tool gave it, after its call
            answered = {m.tool_call_id: m.content for m in original.messages if m.role == "tool"}
            made = [c for m in original.messages for c in m.tool_calls or []]
            assert [t["value"] for t in turns if t["from"] == "observation"] == [answered[c.id] for c in made if c.id in answered]
            assert all(turns[n - 1]["from"] == "function_call" for n, t in enumerate(turns) if t["from"] == "observation")
            assert turns[-1] == {"from": "gpt", "value": final_answer(original)}
            assert row["system"] == next((m.content for m in original.messages if m.role == "system"), "")
            assert json.loads(row["tools"]) == [{"name": f.name, "description": f.description, "parameters": f.parameters} for f in original.tools]
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert info[f"{RUN}_train"] == {"file_name": "train.jsonl", "formatting": "sharegpt",
                                    "columns": {"messages": "conversations", "system": "system", "tools": "tools"}}
    assert sorted(info) == sorted(f"{RUN}_{s}" for s in SPLITS)


def test_sharegpt_reads_back_with_the_sharegpt_reader(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "sharegpt", tmp_path)
    for split, want in expected(dialogues).items():
        back = read_all(sharegpt_reader.read, tmp_path / f"{split}.jsonl") if want else []
        assert len(back) == len(want)
        for original, dialogue in zip(want, back):
            assert [(n, json.loads(a)) for n, a in calls(dialogue, finish=True)] == [(n, json.loads(a)) for n, a in calls(original, finish=True)]
            # each call's response, in call order (the calls of a parallel turn come back one per turn)
            made = {c.id: c.name for m in dialogue.messages for c in m.tool_calls or []}
            assert [(made[m.tool_call_id], m.content) for m in dialogue.messages if m.role == "tool"] == [
                (m.name, m.content) for m in original.messages if m.role == "tool"]
            assert final_answer(dialogue) == final_answer(original)
            assert [m.content for m in dialogue.messages if m.role in ("system", "user")] == [
                m.content for m in original.messages if m.role in ("system", "user")]
            assert [(f.name, f.description, f.parameters) for f in dialogue.tools] == [(f.name, f.description, f.parameters) for f in original.tools]


def test_toolbench_answers_read_back_with_the_repo_reader(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "toolbench", tmp_path)
    assert summary["skipped"] == {}
    for split, want in expected(dialogues).items():
        back = read_all(toolbench_reader.read, tmp_path / "answer" / split) if want else []
        # the reader's id is the file name, <query_id>_<method>
        named = {toolbench_file_name(d): d for d in want}
        assert sorted(d.id for d in back) == sorted(named)
        for dialogue in back:
            original = named[dialogue.id]
            assert calls(dialogue) == calls(original)
            assert calls(dialogue, finish=True)[-1][0] == "Finish"
            assert final_answer(dialogue) == final_answer(original)
            # the i-th call of the read-back path is the i-th call of the record: same response
            answered = {m.tool_call_id: m.content for m in original.messages if m.role == "tool"}
            back_answers = {m.tool_call_id: m.content for m in dialogue.messages if m.role == "tool"}
            pairs = zip([c for m in original.messages for c in m.tool_calls or [] if c.name != "Finish"],
                        [c for m in dialogue.messages for c in m.tool_calls or [] if c.name != "Finish"], strict=True)
            assert all(back_answers.get(b.id) == answered.get(o.id) for o, b in pairs)


def per_record(instances: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """ToolLLaMA instances grouped by record: a record's steps come one after another, their
    step numbers growing; a step number that does not grow, or another query, starts a record."""
    groups: list[list[dict[str, Any]]] = []
    previous: tuple[int, str] | None = None
    for instance in instances:
        step, query = instance["id"].removeprefix("Step ").split(": ", 1)
        if previous is None or int(step) <= previous[0] or query != previous[1]:
            groups.append([])
        groups[-1].append(instance)
        previous = (int(step), query)
    return groups


def test_toolllama_conversations_parse_with_the_react_parser(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolbench", tmp_path)
    for split, want_records in expected(dialogues).items():
        path = tmp_path / f"toolllama/{split}.json"
        groups = per_record(json.loads(path.read_text())) if want_records else []
        assert len(groups) == len(want_records)
        for steps, original in zip(groups, want_records):
            # each step is the path up to one call, that call its last turn: the last step holds them all
            whole = steps[-1]["conversations"]
            roles = [t["from"] for t in whole]
            assert roles[:2] == ["system", "user"] and set(roles) <= {"system", "user", "assistant", "function"}
            assert "Specifically, you have access to the following APIs: " in whole[0]["value"]
            got = []
            for turn in whole:
                if turn["from"] == "assistant":
                    assert turn["value"].startswith("\nThought: ")
                    _, parsed = parse_turn(turn["value"].removeprefix("\n"))
                    got += [(c.name, c.arguments) for c in parsed]
            assert all(step["conversations"][-1]["from"] == "assistant" for step in steps)
            want = [(c.name, json.loads(c.arguments)) for m in original.messages for c in m.tool_calls or []]
            if not want or want[-1][0] != "Finish":
                want.append(("Finish", {"return_type": "give_answer", "final_answer": final_answer(original)}))
            assert got == want and len(steps) == len(want)


def test_toolalpaca_reads_back_with_the_repo_reader(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "toolalpaca", tmp_path)
    keep = lambda d: users(d) == 1 and bool(calls(d, finish=True))  # noqa: E731
    assert summary["skipped"] == {"not_single_turn": sum(users(d) != 1 for d in dialogues),
                                  "no_calls": sum(users(d) == 1 and not calls(d, finish=True) for d in dialogues)}
    for split, want in expected(dialogues, keep).items():
        back = read_all(toolalpaca_reader.read, tmp_path / f"{split}.json") if want else []
        assert len(back) == len(want)
        # entries group records by tool, so records come back in tool order: matched by request and calls
        originals = {(next(m.content for m in d.messages if m.role == "user"), tuple(calls(d, finish=True))): d for d in want}
        for dialogue in back:
            original = originals.pop((dialogue.messages[0].content, tuple(calls(dialogue, finish=True))))
            # an entry documents every function of its tool: the record's are among them
            read_back = {g.name: g for g in dialogue.tools}
            assert set(read_back) >= {f.name for f in original.tools}
            for f in original.tools:
                g = read_back[f.name]
                assert g.parameters["properties"] == f.parameters.get("properties", {})
                assert set(g.parameters["required"]) >= set(f.parameters.get("required", []))
                assert g.returns == f.returns
        assert originals == {}


def test_toolalpaca_instances_hold_steps_observations_and_answer(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolalpaca", tmp_path)
    entries = [e for s in SPLITS for e in json.loads((tmp_path / f"{s}.json").read_text())]
    originals = [d for d in dialogues if users(d) == 1 and calls(d, finish=True)]
    instances = [(golden, instance) for e in entries for golden, instance in zip(e["Golden_Answers"], e["Instances"], strict=True)]
    assert len(instances) == len(originals)
    for golden, instance in instances:
        original = next(d for d in originals if [(s["Action"], s["Action_Input"]) for s in golden] == calls(d, finish=True))
        answered = {m.tool_call_id: m.content for m in original.messages if m.role == "tool"}
        ids = [c.id for m in original.messages for c in m.tool_calls or []]
        assert [step[1] for step in instance["intermediate_steps"]] == [answered.get(i, "") for i in ids]
        assert instance["output"] == final_answer(original)
        for (action, action_input, log), _ in instance["intermediate_steps"]:
            assert log.endswith(f"\nAction: {action}\nAction Input: {action_input}")


def test_toolalpaca_reads_back_the_instances_observations_and_answer(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolalpaca", tmp_path)
    originals = {(next(m.content for m in d.messages if m.role == "user"), tuple(calls(d, finish=True))): d
                 for d in dialogues if users(d) == 1 and calls(d, finish=True)}
    back = [d for s in SPLITS for d in read_all(toolalpaca_reader.read, tmp_path / f"{s}.json")]
    assert len(back) == len(originals)
    for dialogue in back:
        original = originals[(dialogue.messages[0].content, tuple(calls(dialogue, finish=True)))]
        answered = {m.tool_call_id: m.content for m in original.messages if m.role == "tool"}
        # one call per step, each followed by its observation, then the instance's output
        assert [m.content for m in dialogue.messages if m.role == "tool"] == [answered.get(c.id, "") for m in original.messages for c in m.tool_calls or []]
        assert all(m.tool_call_id == c.id for m, c in zip(dialogue.messages[2::2], [c for m in dialogue.messages for c in m.tool_calls or []]))
        assert final_answer(dialogue) == final_answer(original)


def test_toolalpaca_instance_whose_steps_differ_is_not_read(run_store: ObjectStore, tmp_path: Path) -> None:
    export_run(run_store, RUN, "toolalpaca", tmp_path)
    entries = json.loads((tmp_path / "train.json").read_text())
    step = entries[0]["Instances"][0]["intermediate_steps"][0][0]
    step[1] = step[1] + " "  # another Action Input than the golden answer's
    (tmp_path / "changed.json").write_text(json.dumps(entries))
    first, *_ = read_all(toolalpaca_reader.read, tmp_path / "changed.json")
    assert [m.role for m in first.messages] == ["user"] + ["assistant"] * len(entries[0]["Golden_Answers"][0])


def test_toolalpaca_has_one_entry_per_tool_with_its_description_introduction_and_link(
        dialogues: list[Dialogue], tmp_path: Path) -> None:
    tools = {t.id: t.model_copy(update={"introduction": f"About {t.name}.", "link": f"https://example.com/{t.name}"})
             for t in pool(1)}
    store = open_store(tmp_path / "store")
    write_run(store, dialogues)
    write_rows(store, f"runs/{RUN}/pool/part-00000.parquet", [(t.id, t.to_json()) for t in tools.values()])
    export_run(store, RUN, "toolalpaca", tmp_path / "out")
    for split in SPLITS:
        entries = json.loads((tmp_path / "out" / f"{split}.json").read_text())
        assert len({e["Name"] for e in entries}) == len(entries)  # one entry per tool (or tool set)
        for entry in entries:
            by_name = {t.name: t for t in tools.values()}
            named = [by_name[name] for name in entry["Name"].split(" / ")]
            assert entry["Link"] == " ".join(t.link for t in named)
            assert entry["Introduction"] == "\n".join(t.introduction for t in named)
            assert entry["Description"] == "\n".join(t.description for t in named if t.description)
            assert len(entry["Instructions"]) == len(entry["Golden_Answers"]) == len(entry["Instances"])
    assert any(len(e["Instructions"]) > 1 for s in SPLITS for e in json.loads((tmp_path / "out" / f"{s}.json").read_text()))


def call_turns(dialogue: Dialogue) -> int:
    return sum(1 for m in dialogue.messages if m.role == "assistant" and m.tool_calls)


def one_step(dialogue: Dialogue) -> bool:
    """One request whose calls are all made in the first assistant turn (or no calls)."""
    assistants = [m for m in dialogue.messages if m.role == "assistant"]
    return users(dialogue) == 1 and (call_turns(dialogue) == 0 or (call_turns(dialogue) == 1 and bool(assistants[0].tool_calls)))


def test_xlam_keeps_every_call_or_skips_the_record(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "xlam", tmp_path)
    several = sum(1 for d in dialogues if users(d) == 1 and call_turns(d) > 1)
    assert several and summary["skipped"] == {"not_single_turn": sum(users(d) != 1 for d in dialogues), "calls_in_several_turns": several}
    for split, want in expected(dialogues, one_step).items():
        back = read_all(xlam_reader.read, tmp_path / f"{split}.jsonl") if want else []
        assert len(back) == len(want)
        for original, dialogue in zip(want, back):
            # the answers are all the record's calls, none left out
            assert [(c.name, json.loads(c.arguments)) for c in dialogue.messages[-1].tool_calls or []] == [
                (c.name, json.loads(c.arguments)) for m in original.messages for c in m.tool_calls or []]
            assert dialogue.messages[0].content == next(m.content for m in original.messages if m.role == "user")
            for f, g in zip(original.tools, dialogue.tools, strict=True):
                assert g.name == f.name and g.description == f.description
                assert set(g.parameters["required"]) == set(f.parameters.get("required", []))
                for name, schema in f.parameters.get("properties", {}).items():
                    if schema.get("type") in ("string", "integer", "number", "boolean"):
                        assert g.parameters["properties"][name]["type"] == schema["type"]
                    assert g.parameters["properties"][name].get("enum") == schema.get("enum")
    # numbered across the splits in the order written: unique in the export's folder, which verify reads as one
    ids = sorted(row["id"] for split in SPLITS for row in read_jsonl(tmp_path / f"{split}.jsonl"))
    assert ids == list(range(summary["exported"]))


BFCL_FILE = re.compile(r".*BFCL_v4_(\w+?)(?:_score|_result)?\.json")  # BFCL's extract_test_category


def bfcl_category(dialogue: Dialogue) -> str | None:
    """BFCL's single-turn category of a record, by BFCL's definitions; None when it has none."""
    made = [c for m in dialogue.messages for c in m.tool_calls or []]
    if not made:
        return "irrelevance" if dialogue.mode == "non_tool" else None
    several = len(dialogue.tools) > 1
    return ("multiple" if several else "simple_python") if len(made) == 1 else ("parallel_multiple" if several else "parallel")


def test_bfcl_files_and_ids_follow_bfcl_conventions(run_store: ObjectStore, dialogues: list[Dialogue], tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "bfcl", tmp_path)
    keep = lambda d: one_step(d) and bfcl_category(d) is not None  # noqa: E731
    assert summary["exported"] == sum(keep(d) for d in dialogues)
    originals = by_id(dialogues)
    seen = 0
    for split, want in expected(dialogues, keep).items():
        folder = tmp_path / split
        record_of = {row["id"]: row["record_id"] for row in read_jsonl(folder / "record_ids.jsonl")} if want else {}
        for path in sorted(folder.glob("*.json")) if want else []:
            file_category = BFCL_FILE.match(path.name).group(1)  # type: ignore[union-attr]
            questions = read_jsonl(path)
            answer_path = folder / "possible_answer" / path.name
            answers = {a["id"]: a for a in read_jsonl(answer_path)} if answer_path.exists() else {}
            assert [q["id"] for q in questions] == [f"{file_category}_{n}" for n in range(len(questions))]
            for question in questions:
                seen += 1
                assert question["id"].rsplit("_", 1)[0] == file_category  # BFCL's category from the id
                original = originals[record_of[question["id"]]]
                assert bfcl_category(original) == file_category
                assert question["question"] == [[{"role": "user", "content": next(m.content for m in original.messages if m.role == "user")}]]
                for function, f in zip(question["function"], original.tools, strict=True):
                    assert function["parameters"]["type"] == "dict"
                    assert normalize_schema(function["parameters"]) == f.parameters
                if file_category == "irrelevance":
                    assert question["id"] not in answers
                    continue
                made = [c for m in original.messages for c in m.tool_calls or []]
                truth = answers[question["id"]]["ground_truth"]
                assert [next(iter(t)) for t in truth] == [c.name for c in made]
                for entry, call in zip(truth, made):  # the values themselves are judged by BFCL's checker (test_bfcl_checker.py)
                    values = entry[call.name]
                    assert set(json.loads(call.arguments)) <= set(values)
                    omitted = set(values) - set(json.loads(call.arguments))
                    assert all("" in values[name] for name in omitted)
    assert seen == summary["exported"]


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "toolbench", "toolalpaca", "xlam", "bfcl", "hf"])
def test_export_is_deterministic(run_store: ObjectStore, tmp_path: Path, fmt: str) -> None:
    export_run(run_store, RUN, fmt, tmp_path / "a")
    export_run(run_store, RUN, fmt, tmp_path / "b")
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    assert all((tmp_path / "a" / p).read_bytes() == (tmp_path / "b" / p).read_bytes() for p in files_a)


@pytest.mark.skipif("masked" not in Message.model_fields, reason="the record model has no masked turns")
def test_a_masked_assistant_turn_gets_no_loss_weight(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    original = next(d for d in dialogues if d.id.endswith("-single"))
    masked = [m.model_copy(update={"masked": True}) if m.role == "assistant" and m.tool_calls else m for m in original.messages]
    store = open_store(tmp_path / "store")
    write_run(store, [original.model_copy(update={"messages": masked})])
    export_run(store, RUN, "openai", tmp_path / "out")
    (line,) = [row for s in SPLITS for row in read_jsonl(tmp_path / f"out/{s}.jsonl")]
    assert [m.get("weight") for m in line["messages"]] == [0 if m.masked else None for m in masked]
