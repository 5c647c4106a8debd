"""ToolEval's converted answers, built from ToolBench's released answers the way ToolBench's
``convert_to_answer_format.py`` builds them (valid answers: the winning path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolfactory.formats import tooleval
from toolfactory.models import Dialogue
from toolfactory.stages.verify.report import verify_file


def converted(answer_generation: dict[str, Any], method: str) -> dict[str, Any]:
    """One query of ToolEval's input, as ToolBench's converter writes it."""
    conversation = answer_generation["train_messages"][-1]
    chain: list[dict[str, Any]] = [{"role": "system", "message": ""}, {"role": "user", "message": answer_generation["query"][:100]}]
    index = 2
    while index < len(conversation):
        message = conversation[index]
        if message["role"] == "assistant":
            if "function_call" in message:
                call = message["function_call"]
                response = conversation[index + 1]["content"] if call["name"] != "Finish" else ""
                chain.append({"role": "tool", "message": str({"name": call["name"], "arguments": call["arguments"], "response": response})[:100]})
                index += 1
            else:
                chain.append({"role": "assistant", "message": str(message["content"])[:100]})
        index += 1
    for node, after in zip(chain, [*chain[1:], None]):
        node["next"] = [after] if after is not None else []
    return {"query": answer_generation["query"], "available_tools": answer_generation["function"],
            "answer": {"method": method, "total_steps": len(chain), "final_answer": answer_generation["final_answer"],
                       "answer_details": [chain[0]]}}


def tooleval_file(shared_data: Path, tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    out: dict[str, Any] = {}
    names: dict[str, list[str]] = {}
    for path in sorted((shared_data / "toolbench/answer/G1_answer").glob("*.json")):
        generation = json.loads(path.read_text())["answer_generation"]
        if generation["valid_data"]:
            qid = path.name.split("_")[0]
            out[qid] = converted(generation, "DFS_woFilter_w2")
            names[qid] = [m["function_call"]["name"] for m in generation["train_messages"][-1] if m.get("function_call")]
    file = tmp_path / "converted_answers.json"
    file.write_text(json.dumps(out))
    return file, names


def test_every_converted_answer_is_read_with_its_calls(shared_data: Path, tmp_path: Path) -> None:
    file, names = tooleval_file(shared_data, tmp_path)
    dialogues = list(tooleval.read(file))
    assert all(isinstance(d, Dialogue) for d in dialogues) and len(dialogues) == len(names) == 4
    assert {d.id: [c.name for m in d.messages for c in m.tool_calls or []] for d in dialogues} == names  # type: ignore[union-attr]


def test_the_released_converted_answers_pass_validity(shared_data: Path, tmp_path: Path) -> None:
    file, _ = tooleval_file(shared_data, tmp_path)
    report = verify_file(file, "tooleval", tmp_path / "r")
    assert (report["parsed"], report["accepted"]) == (4, 4), report["rules"]
