"""ToolBench answers and ToolLLaMA training conversations (ToolLLM §2.3, Appendix A.4).

Two outputs per split:

* ``answer/<split>/<id>.json``: one ToolBench answer file per record, the layout of ToolBench's
  ``data/answer/G1_answer`` (what :mod:`toolfactory.formats.toolbench` reads, a folder at a time)::

      {"answer_generation": {"valid_data": true, "query_count", "total_tokens", "final_answer",
        "function", "chain": [], "train_messages", "query", "finish_type"}}

  ``train_messages`` is ToolBench's list of training prefixes, one per assistant message, the
  last one the whole path: OpenAI-functions-era messages (system, user, assistant with one
  ``function_call {name, arguments}``, ``function {name, content}``), parallel calls written one
  call per assistant message, each followed by its response. The path ends with the ``Finish``
  call: a record that ends with its own ``Finish`` keeps it (its response and closing answer
  are dropped, as ToolBench stores them); any other record ends with an added
  ``Finish(give_answer, final_answer=<its final answer>)`` — so a record that does not end with
  an assistant answer is skipped (``no_final_answer``), as is one that goes on after its
  ``Finish`` (``finish_not_last``). ``function`` lists the record's functions in ToolBench's
  shape (``parameters.optional`` added) plus ``Finish``; ``final_answer`` is Finish's argument
  text; ``total_tokens`` is 0 (records do not keep token counts); no ``tree``: there was no
  DFSDT search tree. The file name is the record id (characters outside ``[A-Za-z0-9._-]``
  replaced, with a hash suffix then). Files are compact JSON: ToolBench's are indented, which
  no JSON reader needs and which triples the time of a ToolBench export.
* ``toolllama/<split>.json``: a JSON list of ToolLLaMA conversations, built from the whole
  path as ToolBench's ``preprocess_toolllama_data.py`` builds them (roles system/user/assistant/
  function; an assistant call becomes ``"\\nThought: …\\nAction: name\\nAction Input: {…}"``,
  with the text of preceding text-only assistant messages as the Thought; the system prompt gets
  ToolBench's format instruction and ``Specifically, you have access to the following APIs:``
  with the functions). ToolBench emits one instance per prefix ("Step N"); a trainer with
  per-turn loss masking needs only the whole path, so one conversation per record is written.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from toolfactory.export.base import FINISH_NOT_LAST, NO_FINAL_ANSWER, Exporter, ExportOptions, Skip
from toolfactory.export.output import JsonList, OutputDir
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import FINISH, all_calls, arguments_object, final_answer, function_dict, responses
from toolfactory.formats.toolbench import SYSTEM
from toolfactory.models import Dialogue, Function, Message, ToolCall, stable_id
from toolfactory.stages.verify.corpus import FINISH_FUNCTION

STEP_PHRASE = "with a function call to actually excute your step."  # sic: ToolBench's prompt
FORMAT_INSTRUCTION = " Your output should follow this format:\nThought:\nAction\nAction Input:\n"
APIS = "\nSpecifically, you have access to the following APIs: "
ANSWERS = "answer"  # the folder of answer files, cleared when an export starts or fails
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(record_id: str) -> str:
    safe = _UNSAFE.sub("_", record_id)[:120]
    return safe if safe == record_id and safe not in ("", ".", "..") else f"{safe}_{stable_id(record_id)[:8]}"


def toolbench_function(function: Function) -> dict[str, Any]:
    out = function_dict(function)
    if function.name != FINISH and isinstance(out["parameters"].get("properties"), dict):
        required = set(out["parameters"].get("required") or [])
        out["parameters"] = {**out["parameters"], "optional": [p for p in out["parameters"]["properties"] if p not in required]}
    return out


def query_of(dialogue: Dialogue) -> str:
    """The first user request, without ToolBench's ``Begin!`` framing when it has it."""
    text = next((m.content or "" for m in dialogue.messages if m.role == "user"), "")
    return text.strip().removesuffix("Begin!").strip()


def _finished_path(dialogue: Dialogue) -> tuple[list[Message], ToolCall]:
    """The messages of the path up to and including the Finish call turn, and that call."""
    messages = dialogue.messages
    ends = [i for i, m in enumerate(messages) if m.role == "assistant" and any(c.name == FINISH for c in m.tool_calls or [])]
    if ends:
        last = ends[-1]
        tail = messages[last + 1:]
        closing = tail[-1:] if tail and tail[-1].role == "assistant" and not tail[-1].tool_calls else []
        if any(m.role != "tool" for m in tail[: len(tail) - len(closing)]):
            raise Skip(FINISH_NOT_LAST, "messages other than responses follow the Finish call")
        finish = [c for c in messages[last].tool_calls or [] if c.name == FINISH][-1]
        return [*messages[: last + 1], *(m for m in tail if m.role == "tool")], finish
    answer = final_answer(dialogue)
    if answer is None:
        raise Skip(NO_FINAL_ANSWER, f"the dialogue ends with a {dialogue.messages[-1].role if messages else 'no'} message")
    finish = ToolCall(id="finish", name=FINISH, arguments=json.dumps({"return_type": "give_answer", "final_answer": answer}, ensure_ascii=False))
    return [*messages[:-1], Message(role="assistant", tool_calls=[finish])], finish


def path_messages(dialogue: Dialogue) -> tuple[list[dict[str, Any]], ToolCall]:
    """The whole path in ToolBench's message shape (see the module doc), and the Finish call."""
    messages, finish = _finished_path(dialogue)
    answers = responses(dialogue)
    called = {c.id for c in all_calls(dialogue)}
    out: list[dict[str, Any]] = [] if messages and messages[0].role == "system" else [{"role": "system", "content": SYSTEM}]
    for message in messages:
        if message.role in ("system", "user"):
            out.append({"role": message.role, "content": message.content})
        elif message.role == "assistant" and not message.tool_calls:
            out.append({"role": "assistant", "content": message.content})
        elif message.role == "assistant":
            for k, call in enumerate(message.tool_calls or []):
                out.append({"role": "assistant", "content": message.content if k == 0 else None,
                            "function_call": {"name": call.name, "arguments": call.arguments}})
                answer = answers.get(call.id)
                if answer is not None and call.name != FINISH:
                    out.append({"role": "function", "name": call.name, "content": answer.content})
        elif message.tool_call_id not in called:  # a response to no call of the record: kept in place
            out.append({"role": "function", "name": message.name, "content": message.content})
    return out, finish


def answer_file(dialogue: Dialogue) -> dict[str, Any]:
    path, finish = path_messages(dialogue)
    return_type = arguments_object(finish).get("return_type")
    functions = [toolbench_function(f) for f in dialogue.tools]
    if not any(f.name == FINISH for f in dialogue.tools):
        functions.append(function_dict(FINISH_FUNCTION))
    return {"answer_generation": {
        "valid_data": True,
        "query_count": sum(1 for m in path if m.get("function_call")),
        "total_tokens": 0,
        "final_answer": finish.arguments,
        "function": functions,
        "chain": [],
        "train_messages": [path[: i + 1] for i, m in enumerate(path) if m["role"] == "assistant"],
        "query": query_of(dialogue),
        "finish_type": "give_up" if return_type == "give_up_and_restart" else "give_answer",
    }}


def toolllama_system(content: str, functions: list[dict[str, Any]]) -> str:
    """ToolBench's ``process_system_message``: the format instruction and the API list."""
    return content.replace(STEP_PHRASE, STEP_PHRASE + FORMAT_INSTRUCTION) + APIS + str(functions)


def toolllama_conversations(path: list[dict[str, Any]], functions: list[dict[str, Any]]) -> list[dict[str, str]]:
    """ToolLLaMA's conversation of a whole path (ToolBench's preprocessing, see the module doc)."""
    conversations: list[dict[str, str]] = []
    react = ""
    for message in path:
        if message["role"] != "assistant":
            value = toolllama_system(message["content"] or "", functions) if message["role"] == "system" else message["content"] or ""
            conversations.append({"from": message["role"], "value": value})
            react = ""
            continue
        if message.get("content"):
            react += f"\nThought: {message['content']}"
        call = message.get("function_call")
        if call is None:
            continue
        react = react or "\nThought: "
        conversations.append({"from": "assistant", "value": f"{react}\nAction: {call['name']}\nAction Input: {call['arguments']}"})
        react = ""
    return conversations


class ToolBenchExporter(Exporter):
    name = "toolbench"

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.toolllama = {s: JsonList(out, f"toolllama/{s}.json") for s in self.splits}
        self.answers = {s: 0 for s in self.splits}
        out.clear(ANSWERS)

    def write(self, split: str, dialogue: Dialogue) -> None:
        answer = answer_file(dialogue)
        generation = answer["answer_generation"]
        conversation = toolllama_conversations(generation["train_messages"][-1], generation["function"])
        name = f"{ANSWERS}/{split}/{file_name(dialogue.id)}.json"
        self.out.write_bytes(name, json.dumps(answer, ensure_ascii=False).encode())
        self.answers[split] += 1
        self.toolllama[split].write({"id": dialogue.id, "conversations": conversation})

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = {f"{ANSWERS}/{s}/": n for s, n in self.answers.items()}
        return {**files, **{f"toolllama/{s}.json": file.commit() for s, file in self.toolllama.items()}}

    def abort(self) -> None:
        for file in self.toolllama.values():
            file.discard()
        self.out.clear(ANSWERS)
