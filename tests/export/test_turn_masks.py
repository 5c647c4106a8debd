"""Turn-level loss masks: which assistant turns are context only, why, and how each export marks them.

The OpenAI lines are checked with the format rules of ``test_openai_rules``; the HF export is
loaded by Hugging Face ``datasets``; the ShareGPT record is read by LLaMA-Factory's own converter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolfactory.curation import turn_masks
from toolfactory.export import SPLITS, export_run
from toolfactory.models import Dialogue, Message, ToolCall, Verdict

from .helpers import RUN, corpus, open_store, read_jsonl, write_run
from .test_openai_rules import format_errors

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def single() -> Dialogue:
    """A valid one-call dialogue: system, user, the call, its response, the answer."""
    return next(d for d in corpus(10, seed=3) if d.id.endswith("-single"))


def recovered(dialogue: Dialogue) -> Dialogue:
    """`dialogue` with a failed first attempt at its call (the pipeline's 400 for a missing
    argument), then the call as it was: the dialogue recovers from the error."""
    i = next(k for k, m in enumerate(dialogue.messages) if m.tool_calls)
    good = dialogue.messages[i].tool_calls[0]
    bad = ToolCall(id="call_failed", name=good.name, arguments="{}")
    error = json.dumps({"status_code": 400, "error": f"missing required parameter of {good.name}"})
    attempt = [Message(role="assistant", tool_calls=[bad]), Message(role="tool", tool_call_id=bad.id, name=bad.name, content=error)]
    return dialogue.model_copy(update={"id": "recovered", "messages": [*dialogue.messages[:i], *attempt, *dialogue.messages[i:]]})


def curated(dialogue: Dialogue) -> Dialogue:
    """`dialogue` as the curate stage writes it: a mask on each assistant turn."""
    out = dialogue.model_copy(deep=True)
    turn_masks.apply(out)
    return out


def assistant_masks(dialogue: Dialogue) -> list[str | None]:
    return [turn_masks.reason(m) for m in dialogue.messages if m.role == "assistant"]


def test_a_recovered_erroneous_call_is_masked_and_the_other_turns_are_trained(single: Dialogue) -> None:
    dialogue = curated(recovered(single))
    assert assistant_masks(dialogue) == [turn_masks.ERROR_RECOVERED, None, None]
    assert assistant_masks(curated(single)) == [None, None]


def test_an_error_without_a_later_success_is_not_masked(single: Dialogue) -> None:
    # The failed attempt is the dialogue's last call of that function: there is no recovery, so
    # the rule layer decides about the record; the turn is not a mistake the dialogue corrected.
    dialogue = recovered(single)
    after = next(k for k, m in enumerate(dialogue.messages) if m.tool_call_id == "call_failed") + 1
    cut = dialogue.model_copy(update={"messages": [*dialogue.messages[:after],
                                                   Message(role="assistant", content="The service refused the request.")]})
    assert assistant_masks(curated(cut)) == [None, None]


def test_an_executed_call_the_session_marked_as_an_error_is_masked_when_recovered() -> None:
    call = lambda n, args: ToolCall(id=f"c{n}", name="read_file", arguments=args)  # noqa: E731
    messages = [Message(role="user", content="Show me notes.txt"),
                Message(role="assistant", tool_calls=[call(1, '{"path": "note.txt"}')]),
                Message(role="tool", tool_call_id="c1", content="FileNotFoundError: note.txt"),
                Message(role="assistant", tool_calls=[call(2, '{"path": "notes.txt"}')]),
                Message(role="tool", tool_call_id="c2", content="buy milk"),
                Message(role="assistant", content="It says: buy milk.")]
    ran = [{"source": "fs", "name": "read_file", "arguments": '{"path": "note.txt"}', "is_error": True},
           {"source": "fs", "name": "read_file", "arguments": '{"path": "notes.txt"}', "is_error": False}]
    dialogue = Dialogue(id="fs", task_id="t", tools=[], messages=messages, generation={"execution": {"calls": ran}})
    assert assistant_masks(curated(dialogue)) == [turn_masks.ERROR_RECOVERED, None, None]
    # Without the session's flags the text is no error by the API convention: nothing is masked.
    assert assistant_masks(curated(dialogue.model_copy(update={"generation": {}}))) == [None, None, None]


def test_a_turn_a_rule_flagged_is_masked_with_the_rule_code(single: Dialogue) -> None:
    i = next(k for k, m in enumerate(single.messages) if m.tool_calls)
    warning = Verdict(code="arg_value_ungrounded", passed=False, severity="warning", message="region",
                      path=f"messages[{i}].tool_calls[0].arguments/region")
    elsewhere = Verdict(code="tool_description_missing", passed=False, severity="warning", message="", path="tools[0]")
    dialogue = curated(single.model_copy(update={"verdicts": [warning, elsewhere]}))
    assert assistant_masks(dialogue) == ["flagged_arg_value_ungrounded", None]
    # curate.turn_masks chooses the reasons: without `flagged`, the same turn is learned.
    unflagged = single.model_copy(update={"verdicts": [warning, elsewhere]}, deep=True)
    turn_masks.apply(unflagged, ["error_recovered", "samples_disagreed"])
    assert assistant_masks(unflagged) == [None, None]


def test_the_curate_stage_masks_the_turns_it_keeps_and_counts_them_in_its_profile(tmp_path: Path) -> None:
    from curation.staged import curate_parts
    from toolfactory.simulator import SimulatorSettings, start_simulator

    seen: set[str] = set()
    dialogues = []
    for d in corpus(30, seed=5):  # distinct first requests: nothing here is a duplicate
        text = next(m.content or "" for m in d.messages if m.role == "user")
        if text not in seen and d.id.endswith(("-single", "-sequential", "-parallel")):
            seen.add(text)
            dialogues.append(d)
    dialogues[0] = recovered(dialogues[0]).model_copy(update={"id": "recovered"})
    with start_simulator(SimulatorSettings()) as simulator:
        out = curate_parts(simulator.base_url, [dialogues[:3], dialogues[3:]], tmp_path, (), "curate.clusters=2")
    kept = {d.id: d for d in out.records if isinstance(d, Dialogue)}
    assert "recovered" in kept and not out.rejected
    assert [m.mask for m in kept["recovered"].messages if m.role == "assistant"] == [turn_masks.ERROR_RECOVERED, None, None]
    turns = sum(1 for d in kept.values() for m in d.messages if m.role == "assistant")
    assert out.profile[turn_masks.PROFILE] == {turn_masks.ERROR_RECOVERED: 1}
    assert out.profile[turn_masks.TURNS] == {turn_masks.TRAINED: turns - 1, turn_masks.MASKED: 1}


def test_the_openai_export_gives_a_masked_turn_weight_0_and_passes_the_format_rules(tmp_path: Path, single: Dialogue) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, [curated(recovered(single)), curated(single)])
    summary = export_run(store, RUN, "openai", tmp_path / "out")
    lines = {len(line["messages"]): line for s in SPLITS for line in read_jsonl(tmp_path / "out" / f"{s}.jsonl")}
    assert [format_errors(line) for line in lines.values()] == [[], []]
    masked, clean = lines[len(single.messages) + 2], lines[len(single.messages)]
    assert [m.get("weight") for m in masked["messages"] if m["role"] == "assistant"] == [0, None, None]
    assert masked["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert all("weight" not in m for m in clean["messages"])
    assert summary["turn_masks"] == {"carried": True, "assistant_turns": 5, "masked_records": 1,
                                     "masked_turns": {turn_masks.ERROR_RECOVERED: 1}}


def test_a_masked_final_answer_keeps_its_weight_when_it_becomes_finish(tmp_path: Path, single: Dialogue) -> None:
    from .test_openai_rules import searched

    dialogue = searched(single)
    masked = [*dialogue.messages[:-1], dialogue.messages[-1].model_copy(update={"mask": "flagged_assistant_contradicts_calls"})]
    store = open_store(tmp_path / "store")
    write_run(store, [dialogue.model_copy(update={"messages": masked})])
    export_run(store, RUN, "openai", tmp_path / "out")
    (line,) = [line for s in SPLITS for line in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    last = line["messages"][-1]
    assert last["tool_calls"][0]["function"]["name"] == "Finish" and last["weight"] == 0
    assert [m.get("weight") for m in line["messages"][:-1] if m["role"] == "assistant"] == [None]


def test_the_openai_text_call_format_keeps_the_weight(tmp_path: Path, single: Dialogue) -> None:
    from toolfactory.export import ExportOptions

    store = open_store(tmp_path / "store")
    write_run(store, [curated(recovered(single))])
    export_run(store, RUN, "openai", tmp_path / "out", options=ExportOptions(call_format="xml"))
    (line,) = [line for s in SPLITS for line in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert [m.get("weight") for m in line["messages"] if m["role"] == "assistant"] == [0, None, None]


def test_the_hf_export_marks_train_and_the_reason_and_its_card_counts_them(tmp_path: Path, single: Dialogue) -> None:
    datasets = pytest.importorskip("datasets", reason="the hf export is checked with Hugging Face datasets")
    store = open_store(tmp_path / "store")
    write_run(store, [curated(recovered(single)), curated(single)])
    export_run(store, RUN, "hf", tmp_path / "out")
    # `datasets` refuses a split without rows: the files the card lists.
    files = {s: str(tmp_path / f"out/data/{s}.parquet") for s in SPLITS if f"data/{s}.parquet" in (tmp_path / "out/README.md").read_text()}
    loaded = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path / "cache"))
    message = loaded[next(iter(files))].features["messages"].feature
    assert message["train"].dtype == "bool" and message["mask"].dtype == "string"
    rows = {row["id"]: row for s in files for row in loaded[s]}
    assert [(m["role"], m["train"], m["mask"]) for m in rows["recovered"]["messages"]] == [
        ("system", False, None), ("user", False, None), ("assistant", False, "error_recovered"), ("tool", False, None),
        ("assistant", True, None), ("tool", False, None), ("assistant", True, None)]
    assert [m["train"] for m in rows[single.id]["messages"] if m["role"] == "assistant"] == [True, True]
    card = (tmp_path / "out" / "README.md").read_text()
    section = card.split("## Turn masks", 1)[1].split("\n## ", 1)[0]
    assert "1 of the 5 assistant turns (20.0%), in 1 record(s)" in section
    assert "| `error_recovered` | 1 |" in section


def test_a_stored_dialogue_without_the_mask_field_loads_and_keeps_its_masked_turn(tmp_path: Path, single: Dialogue) -> None:
    stored = json.loads(single.to_json())
    i = next(k for k, m in enumerate(stored["messages"]) if m.get("tool_calls"))
    stored["messages"][i]["masked"] = True  # as the dialogues stage wrote a disagreeing turn before `mask`
    assert all("mask" not in m for m in stored["messages"])
    dialogue = Dialogue.model_validate(stored)
    assert assistant_masks(dialogue) == [turn_masks.SAMPLES_DISAGREED, None]
    store = open_store(tmp_path / "store")
    write_run(store, [dialogue])
    export_run(store, RUN, "openai", tmp_path / "out")
    (line,) = [line for s in SPLITS for line in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert [m.get("weight") for m in line["messages"] if m["role"] == "assistant"] == [0, None]


def test_sharegpt_cannot_carry_a_mask_and_says_so(tmp_path: Path, single: Dialogue) -> None:
    from .consumers import llamafactory_data

    store = open_store(tmp_path / "store")
    write_run(store, [curated(recovered(single))])
    summary = export_run(store, RUN, "sharegpt", tmp_path / "out")
    assert summary["turn_masks"]["carried"] is False and summary["turn_masks"]["masked_turns"] == {"error_recovered": 1}
    (split,) = [s for s in SPLITS if read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    (record,) = read_jsonl(tmp_path / "out" / f"{split}.jsonl")
    # LLaMA-Factory's parser and converter keep a turn's role and text only: the failed call is a
    # turn to learn like any other.
    get_dataset_list, converter = llamafactory_data()
    (attr,) = get_dataset_list([f"{RUN}_{split}"], str(tmp_path / "out"))
    converted = converter(attr, None)(record)
    turns = converted["_prompt"] + converted["_response"]
    assert [t["role"] for t in turns[:3]] == ["user", "function", "observation"]
    assert set(turns[1]) == {"role", "content"} and json.loads(turns[1]["content"])["arguments"] == {}
