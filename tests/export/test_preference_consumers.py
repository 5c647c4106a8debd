"""Preference pairs of a real run, read by their consumers' own code: TRL's chat-template and
tokenization utilities with a tokenizer built here, and LLaMA-Factory's dataset parser,
converter and function formatter (see ``consumers.py`` for how it is loaded without torch)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import StorageConfig
from toolfactory.config.export import PreferenceConfig
from toolfactory.export import ExportOptions, export_run
from toolfactory.export.pairs import CORRUPTION, OUTVOTED_SAMPLE, SEARCH_BRANCH
from toolfactory.storage import ObjectStore
from toolfactory.storage.shards import dataset_parts, read_records

from conftest import small_run_overrides
from .consumers import chat_tokenizer, installed, llamafactory_data

pytestmark = pytest.mark.e2e
SPLITS = ("train", "validation", "test")
API_KEY = "sk-preference-test-0123456789abcdef"


def rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for split in SPLITS if (folder / f"{split}.jsonl").exists()
            for line in (folder / f"{split}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def pair_run(prefect_api: str, ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[ObjectStore, str, Path]:
    """A run of the toolllm and toolace recipes (DFSDT search, self-consistency), exported in both
    preference formats with real attempts only and with synthesized ones."""
    from flows.execute import summary_of
    from flows.generate import generate as generate_flow

    folder = tmp_path_factory.mktemp("preference-run")
    # The quickstart's content faults and behaviours (several calls in a turn, follow-up calls,
    # questions, declines): what makes self-consistency samples disagree and searches backtrack.
    behaviours = {f"llm.simulator.rate_{name}": rate for name, rate in (
        ("hallucinated_function", 0.05), ("missing_required", 0.05), ("wrong_type", 0.05), ("parallel_calls", 0.25),
        ("follow_up_call", 0.3), ("clarify", 0.1), ("decline", 0.1))}
    overrides = small_run_overrides(folder / "data", **{"tasks.recipes": "{toolllm: 0.5, toolace: 0.5}", "tools.max_tools": 16,
                                                          "tools.tools_per_shard": 16,
                                                          **behaviours})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", API_KEY)
        summary = summary_of(generate_flow(config_path=None, overrides=overrides, return_state=True))
    store = ObjectStore.open(StorageConfig(root=str(folder / "data")))
    run_id = summary["run_id"]
    for fmt in ("trl_preference", "llamafactory_ranking"):
        for synthesize in (False, True):
            export_run(store, run_id, fmt, folder / "out" / f"{fmt}-{synthesize}",
                       options=ExportOptions(preference=PreferenceConfig(synthesize=synthesize)))
    export_run(store, run_id, "trl_preference", folder / "out" / "trl_preference-rest",
               options=ExportOptions(preference=PreferenceConfig(synthesize=True, completion="rest")))
    return store, run_id, folder / "out"


def test_the_run_yields_real_pairs_from_its_search_branches_and_outvoted_samples(pair_run: tuple[ObjectStore, str, Path]) -> None:
    store, run_id, out = pair_run
    real = rows(out / "trl_preference-False")
    sources = Counter(row["pair_source"] for row in real)
    assert {SEARCH_BRANCH, OUTVOTED_SAMPLE} <= set(sources) <= {SEARCH_BRANCH, OUTVOTED_SAMPLE, "rejected_record"}
    reasons = {reason for row in real for reason in row["rejected_reasons"]}
    assert all(reason.startswith("search_") or reason == "dialogue_outvoted_decision" or row["pair_source"] == "rejected_record"
               for row in real for reason in row["rejected_reasons"]) and reasons
    assert not any(row["synthesized"] for row in real)
    assert all(row["rejected_reasons"] for row in real)
    accepted = {d["id"] for path in dataset_parts(store, run_id) for d in read_records(store, path)}
    assert {row["chosen_id"] for row in real} <= accepted


def test_synthesized_pairs_are_labelled_and_only_for_dialogues_without_a_real_one(pair_run: tuple[ObjectStore, str, Path]) -> None:
    _, _, out = pair_run
    real, both = rows(out / "trl_preference-False"), rows(out / "trl_preference-True")
    with_real = {row["chosen_id"] for row in real}
    synthesized = [row for row in both if row["synthesized"]]
    assert synthesized and all(row["pair_source"] == CORRUPTION for row in synthesized)
    assert not with_real & {row["chosen_id"] for row in synthesized}
    assert [row for row in both if not row["synthesized"]] == real
    rest = {row["id"]: row for row in rows(out / "trl_preference-rest")}
    assert rest.keys() == {row["id"] for row in both}
    assert any(len(row["chosen"]) > 1 for row in rest.values())
    for row in both:  # the rest of each dialogue starts with the step
        assert rest[row["id"]]["prompt"] == row["prompt"] and rest[row["id"]]["chosen"][0] == row["chosen"][0]


@pytest.mark.parametrize("export", ["False", "True", "rest"])
def test_trl_renders_every_pair_with_its_tools_and_two_different_completions(pair_run: tuple[ObjectStore, str, Path],
                                                                             export: str) -> None:
    installed("transformers", "transformers is not installed (make test installs it)")
    installed("trl", "trl is not installed (make test installs it: pip install --no-deps trl==1.16.0)")
    from trl.data_utils import _tokenize, common_prefix_length, is_conversational, maybe_apply_chat_template

    examples = rows(pair_run[2] / f"trl_preference-{export}")
    assert examples
    tokenizer = chat_tokenizer(json.dumps(example) for example in examples)
    for example in examples:
        assert is_conversational(example)
        rendered = maybe_apply_chat_template(example, tokenizer, tools=example["tools"])
        assert rendered["chosen"] != rendered["rejected"]
        for tool in example["tools"]:
            assert json.dumps(tool["function"]["name"]) in rendered["prompt"]
        assert rendered["prompt"].endswith("<|im_start|>assistant\n")
        # DPOTrainer's tokenization: the completions start where the prompt's tokens end.
        prompt = _tokenize(tokenizer, example["prompt"], add_generation_prompt=True, tools=example["tools"])["input_ids"]
        chosen = _tokenize(tokenizer, example["prompt"] + example["chosen"], tools=example["tools"])["input_ids"]
        rejected = _tokenize(tokenizer, example["prompt"] + example["rejected"], tools=example["tools"])["input_ids"]
        assert common_prefix_length(prompt, chosen) == common_prefix_length(prompt, rejected) == len(prompt)
        assert chosen[len(prompt):] != rejected[len(prompt):]


def test_llamafactory_reads_every_ranking_pair(pair_run: tuple[ObjectStore, str, Path], caplog: pytest.LogCaptureFixture) -> None:
    get_dataset_list, Converter = llamafactory_data()
    from llamafactory.data.formatter import FunctionFormatter, ToolFormatter  # type: ignore[import-not-found]
    from llamafactory.data.tool_utils import FunctionCall  # type: ignore[import-not-found]

    for synthesize in (False, True):
        folder = pair_run[2] / f"llamafactory_ranking-{synthesize}"
        info = json.loads((folder / "dataset_info.json").read_text())
        names = [name for name in info if info[name]["file_name"] == "train.jsonl"]
        (attr,) = get_dataset_list(names, str(folder))
        assert attr.ranking and attr.formatting == "sharegpt"
        converter = Converter(attr, None)
        examples = rows(folder)
        assert examples
        for example in examples:
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                converted = converter(example)
            assert not caplog.records, caplog.text  # "Invalid role tag", "Invalid message count", "abnormal example"
            assert converted["_prompt"] and len(converted["_response"]) == 2
            assert converted["_response"][0] != converted["_response"][1]
            ToolFormatter(tool_format="default").apply(content=converted["_tools"])
            for side in converted["_response"]:
                if side["role"] == "function":
                    FunctionFormatter(slots=["{{content}}"], tool_format="default").apply(content=side["content"])
            assert example["rejected_reasons"] and isinstance(example["synthesized"], bool)
    assert FunctionCall  # the formatter's call type is there: the formatter parsed the calls above


def test_the_two_formats_hold_the_same_pairs(pair_run: tuple[ObjectStore, str, Path]) -> None:
    out = pair_run[2]
    for synthesize in (False, True):
        trl = {row["id"]: row for row in rows(out / f"trl_preference-{synthesize}")}
        ranking = {row["id"]: row for row in rows(out / f"llamafactory_ranking-{synthesize}")}
        assert ranking.keys() <= trl.keys() and len(ranking) >= 0.9 * len(trl)
        for key, row in ranking.items():
            assert row["rejected_reasons"] == trl[key]["rejected_reasons"]
