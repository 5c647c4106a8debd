"""Decontamination: test items of BFCL, ToolBench, ToolAlpaca and a user's file, planted in clean
dialogues verbatim, re-cased and re-ordered, are all rejected; clean dialogues never are."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from toolfactory.catalog.seeds import load_instruction_seeds
from toolfactory.config import DecontaminateConfig, load_config
from toolfactory.curation import contamination as contamination_module
from toolfactory.curation import evaluation_sets
from toolfactory.curation.contamination import (
    CHECKED,
    CONTAMINATED,
    SKIPPED,
    ContaminationIndex,
    Thresholds,
    check_sets,
    checked,
    contamination_index,
)
from toolfactory.curation.evaluation_sets import EvaluationSet, Item, bfcl_set, shipped_set, user_set
from toolfactory.errors import ConfigError
from toolfactory.models import Dialogue, Message
from benchmarks.corpus import valid_dialogues

from .helpers import dialogue, function
from .staged import curate_parts

needs_bfcl = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="needs bfcl-eval (make test installs it)")


# --- planting ------------------------------------------------------------------------------


def cased(text: str, rng: random.Random) -> str:
    return " ".join(rng.choice((str.upper, str.lower, str.title))(word) for word in text.split())


def rotated(text: str, rng: random.Random) -> str:
    """The words from a random point on, then the words before it: clauses moved."""
    words = text.split()
    k = rng.randrange(1, len(words)) if len(words) > 1 else 0
    return " ".join(words[k:] + words[:k])


def shuffled(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


KINDS: dict[str, Callable[[str, random.Random], str]] = {
    "verbatim": lambda text, rng: text, "cased": cased, "rotated": rotated, "shuffled": shuffled}


def planted(clean: Dialogue, item: Item, kind: str, seed: int = 0) -> Dialogue:
    """`clean` with its user turns replaced by the item's turns, paraphrased by `kind` (more turns
    than the dialogue has are appended, each after an assistant sentence)."""
    rng = random.Random(f"{seed}/{item.id}/{kind}")
    turns = [KINDS[kind](turn, rng) for turn in item.turns]
    messages = [m.model_copy() for m in clean.messages]
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    for k, turn in enumerate(turns):
        if k < len(users):
            messages[users[k]].content = turn
        else:
            messages += [Message(role="assistant", content="Sure, done."), Message(role="user", content=turn)]
    return clean.model_copy(update={"id": f"planted-{kind}-{item.id}", "messages": messages})


def clean_dialogues() -> list[Dialogue]:
    """The 300 valid dialogues of the rule layer's corpus and the instruction seeds' queries."""
    seeds = load_instruction_seeds()
    queries = [query.query for group in (seeds.single_tool, seeds.multi_tool) for seed in group for query in seed.queries]
    tools = [function("search_records", "Search records.")]
    return [*valid_dialogues(300), *(dialogue(f"seed-{n}", q, tools) for n, q in enumerate(queries))]


def all_caught(index: ContaminationIndex, items: list[Item], name: str) -> dict[str, list[str]]:
    """{kind: ids of the items planted that way and not reported as `name`}."""
    clean = valid_dialogues(40, seed=7)
    missed: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for n, item in enumerate(items):
        for kind in KINDS:
            found = index.find(planted(clean[n % len(clean)], item, kind))
            if name not in {f.benchmark for f in found}:
                missed[kind].append(item.id)
    return missed


def sample(items: tuple[Item, ...], per_prefix: int) -> list[Item]:
    """The first `per_prefix` items of each category (the id up to its last `_` or `/`)."""
    taken: dict[str, int] = {}
    out = []
    for item in items:
        prefix = item.id.rsplit("/", 1)[0] if "/" in item.id else item.id.rsplit("_", 1)[0]
        if taken.get(prefix, 0) < per_prefix:
            taken[prefix] = taken.get(prefix, 0) + 1
            out.append(item)
    return out


@pytest.fixture(scope="module")
def index() -> ContaminationIndex:
    return contamination_index(DecontaminateConfig())


# --- every planted item is caught ----------------------------------------------------------


@needs_bfcl
def test_bfcl_items_from_the_installed_package_are_caught_copied_recased_and_reordered(index: ContaminationIndex) -> None:
    items = sample(bfcl_set().items, 6)  # six of every category, multi-turn and one-line memory questions included
    assert len(items) > 100 and any(len(item.turns) > 1 for item in items) and any(len(item.turns[0].split()) < 5 for item in items)
    assert all_caught(index, items, "bfcl") == {kind: [] for kind in KINDS}


def test_toolbench_and_toolalpaca_items_of_the_shipped_index_are_caught(index: ContaminationIndex) -> None:
    toolbench, toolalpaca = shipped_set("toolbench"), shipped_set("toolalpaca")
    assert len(toolbench.items) == 765 and len(toolalpaca.items) == 214
    assert all_caught(index, sample(toolbench.items, 25), "toolbench") == {kind: [] for kind in KINDS}
    assert all_caught(index, list(toolalpaca.items), "toolalpaca") == {kind: [] for kind in KINDS}


def test_the_released_toolalpaca_evaluation_file_is_covered_by_the_shipped_index(index: ContaminationIndex, shared_data: Path) -> None:
    released = json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text())
    items = [Item(f"{tool['Name']}/{n}", (text,)) for tool in released for n, text in enumerate(tool["Instructions"])]
    assert len(items) == 100
    assert all_caught(index, items, "toolalpaca") == {kind: [] for kind in KINDS}


def test_a_copy_inside_a_longer_request_is_caught_by_its_13_word_run(index: ContaminationIndex) -> None:
    item = shipped_set("toolbench").items[0]
    request = f"Hello, I have a question for you today. {item.turns[0]} Thanks a lot, I appreciate your help!"
    [finding] = index.find_turns([request])
    assert (finding.benchmark, finding.item, finding.test) == ("toolbench", item.id, "ngram")


def test_a_lightly_edited_request_offering_the_items_functions_is_caught_by_the_tools_test() -> None:
    item = Item("t/1", ("Can you list the upcoming public holidays in Germany for the next year and "
                        "tell me which of them fall on a long weekend",), ("publicholidays", "longweekend"))
    index = ContaminationIndex([EvaluationSet("mine", (item,), "test")], Thresholds())
    edited = "Can you list the upcoming public holidays in Germany over next year and say which of them make a long weekend?"
    assert index.find_turns([edited]) == []  # the words alone are not near enough
    [finding] = index.find_turns([edited], frozenset({"publicholidays", "longweekend", "other"}))
    assert (finding.benchmark, finding.test) == ("mine", "tools") and 0.6 <= finding.score < 0.8


def test_a_short_item_matches_as_a_whole_turn_only(index: ContaminationIndex) -> None:
    short = Item("short", ("How old am I?",))
    only = ContaminationIndex([EvaluationSet("mine", (short,), "test")], Thresholds())
    assert [f.test for f in only.find_turns(["how OLD am i"])] == ["exact"]
    assert [f.test for f in only.find_turns(["am I how old"])] == ["reordered"]
    assert only.find_turns(["Tell me how old am I going to be in 2030 if I was born in 1990?"]) == []


def test_a_text_of_two_sets_is_reported_for_each() -> None:
    alpaca = shipped_set("toolalpaca")
    copied = EvaluationSet("mine", (Item("m0", alpaca.items[0].turns),), "test")
    both = ContaminationIndex([alpaca, copied], Thresholds())
    request = f"Hi! {alpaca.items[0].turns[0]} Thank you so much."
    assert {(f.benchmark, f.test) for f in both.find_turns(list(alpaca.items[0].turns))} == {("toolalpaca", "exact"), ("mine", "exact")}
    assert {f.benchmark for f in both.find_turns([request])} == {"toolalpaca", "mine"}


# --- nothing clean is lost -----------------------------------------------------------------


def test_clean_dialogues_overlap_no_evaluation_set(index: ContaminationIndex) -> None:
    clean = clean_dialogues()
    assert len(clean) == 430
    assert {d.id: index.find(d) for d in clean if index.find(d)} == {}


# --- a file the user names -----------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


QUESTIONS = [
    "Book a table for four at an Italian restaurant near Union Square tomorrow at 7 pm and text me the confirmation",
    "Convert 250 US dollars to Japanese yen at today's rate and tell me how much the bank fee would be",
    "What were the three largest earthquakes recorded in Chile during the last decade, and how deep were they?",
]


def test_items_of_a_users_jsonl_file_are_caught_at_its_field(tmp_path: Path) -> None:
    rows = [{"uid": f"q{n}", "conversation": {"turns": [{"speaker": "user", "utterance": q}]}} for n, q in enumerate(QUESTIONS)]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    settings = DecontaminateConfig(benchmarks=[], files=[{"name": "mybench", "path": str(path), "field": "conversation.turns.*.utterance"}])
    [mine] = contamination_module.evaluation_sets(settings)
    assert [item.id for item in mine.items] == ["0", "1", "2"] and mine.items[1].turns == (QUESTIONS[1],)
    index = ContaminationIndex([mine], Thresholds.of(settings))
    assert all_caught(index, list(mine.items), "mybench") == {kind: [] for kind in KINDS}
    assert not [d.id for d in clean_dialogues() if index.find(d)]


def test_the_question_of_a_users_file_is_found_under_a_common_key(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "a.jsonl", [{"id": "x1", "instruction": QUESTIONS[0], "tools": [{"name": "book_table"}]}])
    [item] = user_set("a", str(jsonl), None).items
    assert item == Item("x1", (QUESTIONS[0],), ("booktable",))
    bfcl_like = tmp_path / "b.json"  # BFCL's turns of messages, in a JSON list
    bfcl_like.write_text(json.dumps([{"id": "b0", "question": [[{"role": "system", "content": "Be brief."},
                                                                  {"role": "user", "content": QUESTIONS[1]}]]}]))
    assert user_set("b", str(bfcl_like), None).items == (Item("b0", (QUESTIONS[1],)),)


def test_a_users_file_that_is_missing_or_holds_no_question_fails_before_the_run(tmp_path: Path) -> None:
    files = [{"name": "mine", "path": str(tmp_path / "nowhere.jsonl")}]
    with pytest.raises(ConfigError, match=r"^curate\.decontaminate\.files\.0\.path: no such file"):
        check_sets(DecontaminateConfig(files=files))
    path = write_jsonl(tmp_path / "empty.jsonl", [{"answer": "42"}])
    with pytest.raises(ConfigError, match=r"^curate\.decontaminate\.files\.0\.field: no question text"):
        check_sets(DecontaminateConfig(benchmarks=[], files=[{"name": "mine", "path": str(path)}]))


@pytest.mark.parametrize(("override", "message"), [
    ("curate.decontaminate.benchmarks=[bfcl, gsm8k]", "curate.decontaminate.benchmarks.1: Input should be"),
    ("curate.decontaminate.files=[{name: bfcl, path: x.json}]", "files.0.name: 'bfcl' is a built-in benchmark"),
    ("curate.decontaminate.files=[{name: a, path: x.json}, {name: a, path: y.json}]", "files.1.name: 'a' names another file"),
    ("curate.decontaminate.files=[{name: My Set, path: x.json}]", "curate.decontaminate.files.0.name: String should match"),
    ("curate.decontaminate.min_words=20", "min_words (20) must not exceed ngram (13)"),
    ("curate.decontaminate.tools_threshold=0.9", "tools_threshold (0.9) must not exceed bag_threshold (0.8)"),
])
def test_invalid_settings_are_one_message_naming_the_field(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(None, [override], environ={})
    assert message in str(error.value) and "\n" not in str(error.value)


# --- BFCL absent ---------------------------------------------------------------------------


def test_without_bfcl_eval_bfcl_is_skipped_with_its_reason_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation_sets, "bfcl_folder", lambda: None)
    settings = DecontaminateConfig(benchmarks=["bfcl", "toolalpaca"])
    contamination_module._sets.cache_clear()
    try:
        assert check_sets(settings) == [f"decontamination: bfcl is not checked: bfcl-eval is not installed ({evaluation_sets.BFCL_INSTALL})"]
        counts = checked(contamination_module.evaluation_sets(settings), Thresholds.of(settings))
    finally:
        contamination_module._sets.cache_clear()
    assert counts[CHECKED] == {"toolalpaca": 214}
    assert counts[SKIPPED] == {f"bfcl: bfcl-eval is not installed ({evaluation_sets.BFCL_INSTALL})": 1}


# --- the curation stages -------------------------------------------------------------------


@pytest.fixture
def planted_run(sim: Any, tmp_path: Path) -> Iterator[tuple[Any, list[Dialogue], list[Dialogue]]]:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"query": q} for q in QUESTIONS])
    clean = [d for d in valid_dialogues(30, seed=11) if d.mode != "non_tool"][:12]
    alpaca = shipped_set("toolalpaca").items
    dirty = [planted(clean[0], alpaca[3], "shuffled"), planted(clean[1], Item("1", (QUESTIONS[1],)), "cased"),
             planted(clean[2], alpaca[40], "verbatim")]
    files = f"curate.decontaminate.files=[{{name: mybench, path: {path}}}]"
    out = curate_parts(sim.base_url, [clean[:6] + dirty[:1], clean[6:] + dirty[1:]], tmp_path / "root", (),
                       "curate.clusters=3", "curate.decontaminate.benchmarks=[toolalpaca]", files)
    yield out, clean, dirty


def test_the_curate_stage_rejects_planted_items_per_set_and_counts_what_it_checked(planted_run: Any) -> None:
    out, clean, dirty = planted_run
    rejected = {r.id: r for r in out.rejected}
    assert set(rejected) == {d.id for d in dirty}
    assert rejected[dirty[0].id].reasons == ["contaminated_toolalpaca"]
    assert rejected[dirty[1].id].reasons == ["contaminated_mybench"]
    assert "overlaps toolalpaca item" in rejected[dirty[2].id].detail
    assert {d.id for d in out.records if isinstance(d, Dialogue)} == {d.id for d in clean}
    assert out.rejections() == {"contaminated_toolalpaca": 2, "contaminated_mybench": 1}
    assert dict(out.profile[CONTAMINATED]) == {"toolalpaca: reordered": 1, "toolalpaca: exact": 1, "mybench: exact": 1}
    assert dict(out.profile[CHECKED]) == {"toolalpaca": 214, "mybench": 3}
    assert out.profile["contamination_settings"]["ngram words"] == 13
