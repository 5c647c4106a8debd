"""The BFCL export judged by BFCL's own AST checker (the ``bfcl-eval`` package, installed by
``make test`` without its dependencies): fed as BFCL's evaluation feeds it, the function docs of
our question file, our possible answers and, as the model output, the dialogue's own calls in the
decoded form the checker takes, every record must pass, and a wrong value must not."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import _ci

from toolfactory.export import export_run
from toolfactory.models import Dialogue

from .helpers import RUN, SHIPMENT, bfcl_corpus, by_id, open_store, read_jsonl, write_run

BFCL_EVAL = "bfcl-eval==2026.3.23"  # as pinned in the Makefile
CATEGORIES = {"simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"}
MODEL = "toolfactory-gold"


class Checker:
    """BFCL's single-turn checks, as its ``eval_runner`` applies them to one entry."""

    def __init__(self) -> None:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.utils import (
            extract_test_category,
            extract_test_category_from_id,
            is_empty_output,
            is_function_calling_format_output,
        )

        self.language = Language.PYTHON  # what BFCL's runner picks for a category that is neither Java nor JavaScript
        self.ast_checker = ast_checker
        self.file_category = extract_test_category
        self.id_category = extract_test_category_from_id
        self.is_empty_output = is_empty_output
        self.is_call_list = is_function_calling_format_output

    def judge(self, category: str, entry: dict[str, Any], answer: dict[str, Any] | None, output: list[dict[str, Any]]) -> dict[str, Any]:
        if category == "irrelevance":  # BFCL's relevance runner: correct when the model calls nothing
            return {"valid": self.is_empty_output(output)}
        assert answer is not None and self.is_call_list(output)
        try:
            return dict(self.ast_checker(entry["function"], output, answer["ground_truth"], self.language, category, MODEL))
        except (TypeError, KeyError, AttributeError) as exc:  # an answer or doc the checker cannot read fails as it does in BFCL's run
            return {"valid": False, "error": [f"the checker crashed: {exc!r}"]}


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checker]:
    """BFCL's checker, imported alone. Its module imports ``constants.model_config`` for one flag
    of the model being judged (``underscore_to_dot``: the model writes ``.`` in function names as
    ``_``), and that module imports every provider's SDK, which the checker does not use: the
    registry is given one entry, the model under test, which writes names as they are (our calls
    carry the functions' own names). bfcl-eval writes its result folders under
    ``BFCL_PROJECT_ROOT`` when imported, so that points to a temporary folder."""
    patch = pytest.MonkeyPatch()
    patch.setenv("BFCL_PROJECT_ROOT", str(tmp_path_factory.mktemp("bfcl-root")))
    registry = types.ModuleType("bfcl_eval.constants.model_config")
    registry.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
    patch.setitem(sys.modules, "bfcl_eval.constants.model_config", registry)
    try:
        loaded = Checker()
    except ImportError as exc:
        patch.undo()
        reason = f"needs BFCL's checker ({BFCL_EVAL}, installed by `make test` with --no-deps): {exc}"
        if _ci():
            pytest.fail(reason)
        pytest.skip(reason)
    yield loaded
    patch.undo()


@pytest.fixture(scope="module")
def corpus_dialogues() -> list[Dialogue]:
    return bfcl_corpus(140, seed=1)


@pytest.fixture
def exported(tmp_path: Path, corpus_dialogues: list[Dialogue]) -> Path:
    store = open_store(tmp_path / "store")
    write_run(store, corpus_dialogues)
    export_run(store, RUN, "bfcl", tmp_path / "out")
    return tmp_path / "out"


def entries(out: Path, checker: Checker, dialogues: list[Dialogue]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]]:
    """(category, question entry, possible answer, the dialogue's calls decoded) for every entry
    of the export, the category found as BFCL finds it, from the file name and from the id."""
    originals = by_id(dialogues)
    for questions in sorted(out.glob("*/*.json")):
        category = checker.file_category(questions.name)
        record_of = {row["id"]: row["record_id"] for row in read_jsonl(questions.parent / "record_ids.jsonl")}
        answer_file = questions.parent / "possible_answer" / questions.name
        answers = {a["id"]: a for a in read_jsonl(answer_file)} if answer_file.exists() else {}
        for entry in read_jsonl(questions):
            assert checker.id_category(entry["id"]) == category
            dialogue = originals[record_of[entry["id"]]]
            output = [{c.name: json.loads(c.arguments)} for m in dialogue.messages for c in m.tool_calls or []]
            yield category, entry, answers.get(entry["id"]), output


def test_bfcl_checker_passes_every_exported_record(exported: Path, checker: Checker, corpus_dialogues: list[Dialogue]) -> None:
    seen: dict[str, int] = {}
    failures = []
    for category, entry, answer, output in entries(exported, checker, corpus_dialogues):
        seen[category] = seen.get(category, 0) + 1
        verdict = checker.judge(category, entry, answer, output)
        if not verdict["valid"]:
            failures.append((entry["id"], verdict.get("error"), answer))
    assert not failures
    assert set(seen) == CATEGORIES  # every category the export writes was judged


def test_bfcl_corpus_covers_nested_arguments(exported: Path, checker: Checker, corpus_dialogues: list[Dialogue]) -> None:
    """The records judged above hold what a possible answer nests: object parameters, arrays of
    objects, objects inside those, arrays of enum values and omitted optional parameters."""
    called = [(name, arguments) for *_, output in entries(exported, checker, corpus_dialogues) for call in output for name, arguments in call.items()]
    values = [value for _, arguments in called for value in arguments.values()]
    assert any(isinstance(value, dict) for value in values)
    assert any(isinstance(value, list) and value and all(isinstance(v, dict) for v in value) for value in values)
    shipments = [arguments for name, arguments in called if name.startswith(SHIPMENT.name)]
    assert any(isinstance(a["sender"]["address"], dict) and isinstance(a["parcels"][0]["size_cm"], dict) for a in shipments)
    assert any(a.get("notify_by") for a in shipments)
    assert any("service" in a for a in shipments) and any("service" not in a for a in shipments)


def wrong(value: Any) -> Any:
    """A value of the same type that the dialogue did not use."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7
    if isinstance(value, str):
        return value + " elsewhere"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["extra"]
    if not value:
        return {"unexpected": 1}
    key = next(iter(value))
    return {**value, key: wrong(value[key])}


def test_bfcl_checker_rejects_a_wrong_argument_value(exported: Path, checker: Checker, corpus_dialogues: list[Dialogue]) -> None:
    judged = 0
    for category, entry, answer, output in entries(exported, checker, corpus_dialogues):
        if category == "irrelevance" or not output[0][next(iter(output[0]))]:
            continue
        (name, arguments), = output[0].items()
        key = next(iter(arguments))
        changed = [{name: {**arguments, key: wrong(arguments[key])}}, *output[1:]]
        assert not checker.judge(category, entry, answer, changed)["valid"], (entry["id"], key)
        judged += 1
    assert judged
