"""A small valid dataset in each format the readers know, written as text, so a test can put in it
what a serializer would refuse: records that each call one function with one number argument,
whose text the test chooses (``"3"``, or an integer longer than Python converts).

``WRITERS[fmt](folder, numbers, stem)`` writes one record per number into `folder` (files named
after `stem`) and returns the files written, each one a path ``toolfactory verify`` reads. Every
format of :data:`toolfactory.formats.FORMATS` has a writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

from toolfactory.definitions.finish import FINISH_FUNCTION

SCHEMA = {"type": "object", "properties": {"n": {"type": "number", "description": "The number."}}, "required": ["n"]}
FUNCTION = {"name": "f", "description": "Double a number.", "parameters": SCHEMA}
FINISH = {"name": FINISH_FUNCTION.name, "description": FINISH_FUNCTION.description, "parameters": FINISH_FUNCTION.parameters}
ANSWER = "Doubled, the number you gave is six, as the function reported for your request."
RESPONSE = '{"v": 6}'
Writer = Callable[[Path, Sequence[str], str], list[Path]]


def request(i: int) -> str:
    return f"What is the double of number {i}?"


def arguments(number: str) -> str:
    return '{"n": ' + number + "}"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(record: Callable[[int, str], str]) -> Writer:
    def write(folder: Path, numbers: Sequence[str], stem: str) -> list[Path]:
        return [_write(folder / f"{stem}.jsonl", "".join(record(i, n) + "\n" for i, n in enumerate(numbers)))]
    return write


def openai_record(i: int, number: str) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments(number)}}
    return json.dumps({"tools": [{"type": "function", "function": FUNCTION}], "messages": [
        {"role": "user", "content": request(i)}, {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": RESPONSE}, {"role": "assistant", "content": ANSWER}]})


def sharegpt_record(i: int, number: str) -> str:
    call = '{"name": "f", "arguments": ' + arguments(number) + "}"  # JSON text the reader parses
    return json.dumps({"conversations": [{"from": "human", "value": request(i)}, {"from": "function_call", "value": call},
                                         {"from": "observation", "value": RESPONSE}, {"from": "gpt", "value": ANSWER}],
                       "system": "", "tools": json.dumps([FUNCTION])})


def xlam_record(i: int, number: str) -> str:
    tools = json.dumps([{"name": "f", "description": FUNCTION["description"], "parameters": {"n": {"type": "float", "description": "The number."}}}])
    answers = '[{"name": "f", "arguments": ' + arguments(number) + "}]"  # JSON text, as xLAM releases it
    return json.dumps({"id": i, "query": request(i), "tools": tools, "answers": answers})


def toolfactory_record(i: int, number: str) -> str:
    return json.dumps({"id": f"r{i}", "task_id": f"r{i}", "recipe": "toolace", "mode": "single", "tools": [FUNCTION], "messages": [
        {"role": "user", "content": request(i)},
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "f", "arguments": arguments(number)}]},
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": RESPONSE}, {"role": "assistant", "content": ANSWER}]})


def toolbench(folder: Path, numbers: Sequence[str], stem: str) -> list[Path]:
    files = []
    for i, number in enumerate(numbers):
        finish = json.dumps({"return_type": "give_answer", "final_answer": ANSWER})
        path = [{"role": "system", "content": "You are AutoGPT, you can use many tools(functions) to do the following task."},
                {"role": "user", "content": request(i)},
                {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": arguments(number)}},
                {"role": "function", "name": "f", "content": RESPONSE},
                {"role": "assistant", "content": None, "function_call": {"name": "Finish", "arguments": finish}}]
        answer = {"win": True, "answer_generation": {"valid_data": True, "query": request(i), "function": [FUNCTION, FINISH],
                                                     "final_answer": finish, "train_messages": [path]}}
        files.append(_write(folder / f"{stem}{i}_CoT@1.json", json.dumps(answer)))
    return files


def toolalpaca(folder: Path, numbers: Sequence[str], stem: str) -> list[Path]:
    operation = {"operationId": "f", "description": FUNCTION["description"], "responses": {"200": {"description": "The double."}},
                 "parameters": [{"name": "n", "in": "query", "required": True, "description": "The number.", "schema": {"type": "number"}}]}
    documentation = {"openapi": "3.0.0", "info": {"title": stem, "version": "1"}, "paths": {"/f": {"get": operation}}}
    tool = {"Name": f"{stem} tool", "Documentation": json.dumps(documentation), "Function_Projection": {"f": ["/f", "GET"]},
            "Instructions": [request(i) for i in range(len(numbers))],
            "Golden_Answers": [[{"Action": "f", "Action_Input": arguments(n)}] for n in numbers],
            "Instances": [{"input": request(i), "output": ANSWER, "intermediate_steps": [[["f", arguments(n), "log"], RESPONSE]]}
                          for i, n in enumerate(numbers)]}
    return [_write(folder / f"{stem}.json", json.dumps([tool]))]


def tooleval(folder: Path, numbers: Sequence[str], stem: str) -> list[Path]:
    answers = {}
    for i, number in enumerate(numbers):
        finish = {"role": "tool", "message": str({"name": "Finish", "arguments": "{}", "response": ""}), "next": []}
        call = {"role": "tool", "message": str({"name": "f", "arguments": arguments(number), "response": RESPONSE}), "next": [finish]}
        answers[f"q{i}"] = {"query": request(i), "available_tools": [FUNCTION, FINISH], "answer": {
            "method": "DFS", "total_steps": 2, "final_answer": ANSWER,
            "answer_details": [{"role": "system", "message": "", "next": [{"role": "user", "message": request(i), "next": [call]}]}]}}
    return [_write(folder / f"{stem}.json", json.dumps(answers))]


def bfcl_multi_turn(folder: Path, numbers: Sequence[str], stem: str) -> list[Path]:
    name = f"BFCL_v4_multi_turn_{stem}.json"
    entries = [{"id": f"{stem}_{i}", "question": [[{"role": "user", "content": f"What is the absolute value of {number}?"}]],
                "initial_config": {}, "path": ["MathAPI.absolute_value"], "involved_classes": ["MathAPI"]}
               for i, number in enumerate(numbers)]
    truths = ['{"id": "' + f"{stem}_{i}" + '", "ground_truth": [["absolute_value(number=' + number + ')"]]}'
              for i, number in enumerate(numbers)]
    _write(folder / "possible_answer" / name, "\n".join(truths) + "\n")
    return [_write(folder / name, "".join(json.dumps(entry) + "\n" for entry in entries))]


WRITERS: dict[str, Writer] = {
    "toolfactory": _jsonl(toolfactory_record),
    "openai": _jsonl(openai_record),
    "sharegpt": _jsonl(sharegpt_record),
    "toolbench": toolbench,
    "xlam": _jsonl(xlam_record),
    "toolalpaca": toolalpaca,
    "tooleval": tooleval,
    "bfcl_multi_turn": bfcl_multi_turn,
}
