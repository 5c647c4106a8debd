"""The pair mechanism (export/pairs.py) on the verifier's valid corpus written as a run: where a
pair is cut, which attempts make none, that synthesized rejections are confirmed by the rule
layer, and that a rejected record of the same task is paired with its reason codes."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from toolfactory.config import load_config
from toolfactory.config.export import MODEL_FAULTS, PreferenceConfig
from toolfactory.errors import ConfigError
from toolfactory.export import ExportOptions, export_run
from toolfactory.export.base import NO_REJECTED_ATTEMPT
from toolfactory.export.openai import with_finish_tool
from toolfactory.export.pairs import (CORRUPTION, REJECTED_RECORD, Attempt, PairMaker, corrupted_attempts, pair, parting,
                                      rejected_attempts)
from toolfactory.models import Dialogue, Rejected
from toolfactory.stages.verify.policy import for_recipe
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import rejected_table

from .helpers import RUN, read_jsonl

SPLITS = ("train", "validation", "test")


def with_calls(dialogues: list[Dialogue]) -> list[Dialogue]:
    return [d for d in dialogues if any(m.tool_calls for m in d.messages)]


def test_a_pair_is_cut_at_the_first_assistant_reply_that_differs(dialogues: list[Dialogue]) -> None:
    made = 0
    for dialogue in with_calls(dialogues):
        exported = with_finish_tool(dialogue).messages  # ToolLLM's Finish as the openai export writes it
        for attempt in corrupted_attempts(dialogue, MODEL_FAULTS):
            found = pair(dialogue, attempt)
            if found is None:
                continue
            made += 1
            k = len(found.prompt)
            rejected = with_finish_tool(dialogue.model_copy(update={"messages": attempt.messages})).messages
            assert found.prompt == exported[:k] and found.prompt[-1].role in ("user", "tool")
            assert found.chosen == [exported[k]] and found.rejected == [rejected[k]]
            assert found.chosen[0].role == found.rejected[0].role == "assistant" and found.chosen != found.rejected
            assert found.synthesized and found.source == CORRUPTION and found.reasons == attempt.reasons
            rest = pair(dialogue, attempt, "rest")
            assert rest is not None and rest.chosen == exported[k:] and rest.rejected == rejected[k:]
    assert made >= 20


def test_attempts_that_part_at_a_tool_response_a_user_turn_or_not_at_all_make_no_pair(dialogues: list[Dialogue]) -> None:
    dialogue = next(d for d in with_calls(dialogues) if any(m.role == "tool" for m in d.messages))
    tool = next(i for i, m in enumerate(dialogue.messages) if m.role == "tool")
    user = next(i for i, m in enumerate(dialogue.messages) if m.role == "user")
    for index in (tool, user):
        messages = [m.model_copy() for m in dialogue.messages]
        messages[index] = messages[index].model_copy(update={"content": (messages[index].content or "") + " (changed)"})
        assert parting(dialogue.messages, messages) is None
        assert pair(dialogue, Attempt("other", messages, ("judge_hallucination",), REJECTED_RECORD)) is None
    assert pair(dialogue, Attempt("same", list(dialogue.messages), ("x",), REJECTED_RECORD)) is None
    assert pair(dialogue, Attempt("shorter", dialogue.messages[:tool], ("x",), REJECTED_RECORD)) is None


def test_every_synthesized_rejection_fails_the_rule_layer_with_its_codes_where_the_accepted_passes(dialogues: list[Dialogue]) -> None:
    kinds = set()
    for dialogue in dialogues:
        policy = for_recipe(dialogue.recipe)
        accepted = {v.code for v in errors(check(dialogue, policy=policy))}
        for attempt in corrupted_attempts(dialogue, MODEL_FAULTS):
            rejected = {v.code for v in errors(check(dialogue.model_copy(update={"messages": attempt.messages}), policy=policy))}
            assert attempt.reasons and set(attempt.reasons) <= rejected - accepted
            assert attempt.synthesized and attempt.detail.split(":")[0] in MODEL_FAULTS
            kinds.add(attempt.detail.split(":")[0])
    assert len(kinds) >= 5


def test_synthesis_is_off_by_default_and_every_record_is_skipped_without_an_attempt(run_store: ObjectStore, tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "trl_preference", tmp_path / "off")
    assert summary["exported"] == 0 and summary["skipped"] == {NO_REJECTED_ATTEMPT: summary["records"]}
    summary = export_run(run_store, RUN, "trl_preference", tmp_path / "on",
                         options=ExportOptions(preference=PreferenceConfig(synthesize=True, max_pairs_per_dialogue=2)))
    written = [row for split in SPLITS for row in read_jsonl(tmp_path / "on" / f"{split}.jsonl")]
    assert summary["exported"] > 0 and written
    assert all(row["synthesized"] and row["pair_source"] == CORRUPTION for row in written)
    assert max(Counter(row["chosen_id"] for row in written).values()) <= 2


def test_a_rejected_record_of_the_same_task_is_paired_with_its_reason_codes(run_store: ObjectStore, dialogues: list[Dialogue],
                                                                            tmp_path: Path) -> None:
    accepted = with_calls(dialogues)[0]
    answer = max(i for i, m in enumerate(accepted.messages) if m.role == "assistant")
    wrong = [m.model_copy() for m in accepted.messages]
    wrong[answer] = wrong[answer].model_copy(update={"content": "The result is 12345.", "tool_calls": None})
    record = accepted.model_copy(update={"id": "rejected-attempt", "messages": wrong}).model_dump()
    rejected = Rejected(id="rejected-attempt", stage="verify", reasons=["judge_hallucination"], detail="made up", record=record)
    sink = io.BytesIO()
    pq.write_table(rejected_table([rejected]), sink)
    run_store.write_bytes(f"runs/{RUN}/verify/rejected/part-00001.parquet", sink.getvalue())

    assert [a.id for a in rejected_attempts(run_store, RUN)[accepted.task_id]] == ["rejected-attempt"]
    for fmt in ("trl_preference", "llamafactory_ranking"):
        export_run(run_store, RUN, fmt, tmp_path / fmt)
        written = [row for split in SPLITS for row in read_jsonl(tmp_path / fmt / f"{split}.jsonl")]
        assert [(row["chosen_id"], row["rejected_id"], row["rejected_reasons"], row["pair_source"], row["synthesized"])
                for row in written] == [(accepted.id, "rejected-attempt", ["judge_hallucination"], REJECTED_RECORD, False)]
    (trl,) = [row for split in SPLITS for row in read_jsonl(tmp_path / "trl_preference" / f"{split}.jsonl")]
    assert trl["rejected"] == [{"role": "assistant", "content": "The result is 12345."}]
    assert len(trl["prompt"]) == answer and trl["tools"] == [f.openai_tool() for f in accepted.tools]


def test_a_pair_maker_keeps_one_pair_per_distinct_rejected_reply(dialogues: list[Dialogue]) -> None:
    dialogue = with_calls(dialogues)[0]
    attempts = corrupted_attempts(dialogue, MODEL_FAULTS)[:1]
    twice = [attempts[0], Attempt("again", attempts[0].messages, ("x",), REJECTED_RECORD)]
    assert len(PairMaker({dialogue.task_id: twice}).pairs(dialogue)) == 1


@pytest.mark.parametrize("setting, field", [
    ("export.preference.corruptions=[no_such_fault]", "export.preference.corruptions"),
    ("export.preference.completion=all", "export.preference.completion"),
    ("export.preference.max_pairs_per_dialogue=0", "export.preference.max_pairs_per_dialogue"),
    ("export.formats=[dpo]", "export.formats"),
])
def test_an_invalid_preference_setting_fails_with_one_message_naming_its_field(setting: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [setting], environ={})
    assert field in str(err.value) and len(str(err.value).splitlines()) == 1


def test_the_ranking_dataset_info_declares_every_split_as_ranking_data(run_store: ObjectStore, tmp_path: Path) -> None:
    export_run(run_store, RUN, "llamafactory_ranking", tmp_path)
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert {entry["file_name"] for entry in info.values()} == {f"{split}.jsonl" for split in SPLITS}
    assert all(entry["ranking"] is True and entry["formatting"] == "sharegpt" and entry["columns"]["chosen"] == "chosen"
               for entry in info.values())


def test_every_fault_the_configuration_offers_is_one_the_corruptions_make() -> None:
    from toolfactory.stages.verify.corruption import KINDS

    assert set(MODEL_FAULTS) <= set(KINDS)
