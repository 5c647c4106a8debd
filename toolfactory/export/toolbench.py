"""ToolBench answers and ToolLLaMA training conversations (ToolLLM §2.3, Appendix A.4).

Two outputs per split:

* ``answer/<split>/<query_id>_<method>.json``: one ToolBench answer file per record, the layout
  of ToolBench's ``data/answer/G1_answer`` and of what its inference writes. ToolBench's own
  scripts find answers by that name: ``preprocess_toolllama_data.py`` keeps the files whose name
  contains the method (``DFS_woFilter_w2`` or ``CoT@1``), and ToolEval's
  ``convert_to_answer_format.py`` takes the query id as the name's part before the first ``_``.
  The method is ``DFS_woFilter_w2`` for a record found by DFSDT search, ``CoT@1`` for any other
  (a ReAct chain, or a simulated dialogue: one chain, no tree). The query id is the record id
  when it is letters, digits and hyphens only, else a stable hash of it (an ``_`` would cut it short); a
  record read from a ToolBench answer file keeps its released name (``10_ChatGPT_DFS_woFilter_w2``).
  Each file holds ToolBench's top-level keys::

      {"win", "tree"?, "forward_args", "compare_candidates",
       "answer_generation": {"valid_data": true, "query_count", "total_tokens", "final_answer",
        "function", "chain": [], "train_messages", "query", "finish_type"}}

  ``win`` is true when the path ends with ``Finish(give_answer)``; ``tree`` is written only when
  the record keeps its search tree (``generation.search.tree``), in ToolBench's nested node
  shape; ``forward_args`` holds ToolBench's search arguments with the values the record
  recorded (null when it did not record them); ``compare_candidates`` is the one kept path as
  ToolBench's list of nodes (Thought / Action / Action Input with its observation).

  ``train_messages`` is ToolBench's list of training prefixes, one per assistant message, the
  last one the whole path: OpenAI-functions-era messages (system, user, assistant with one
  ``function_call {name, arguments}``, ``function {name, content}``), parallel calls written one
  call per assistant message, each followed by its response. The system message is ToolBench's
  own prompt (the record's when it already is ToolBench's): ``preprocess_toolllama_data.py``
  asserts that it contains "with a function call to actually excute your step." (sic), and it
  tells the model to end with ``Finish``, which every path does. The path ends with the
  ``Finish`` call: a record that ends with its own ``Finish`` keeps it (its response and closing
  answer are dropped, as ToolBench stores them); any other record ends with an added
  ``Finish(give_answer, final_answer=<its final answer>)`` — so a record that does not end with
  an assistant answer is skipped (``no_final_answer``), as is one that goes on after its
  ``Finish`` (``finish_not_last``). ``function`` lists the record's functions in ToolBench's
  shape (``parameters.optional`` added) plus ``Finish``; ``final_answer`` is Finish's argument
  text; ``total_tokens`` is 0 (records do not keep token counts). Files are compact JSON:
  ToolBench's are indented, which no JSON reader needs and which triples the time of an export.
* ``toolllama/<split>.json``: a JSON list of ToolLLaMA training instances, exactly what
  ToolBench's ``preprocess_toolllama_data.py`` makes of the split's answer files (run once per
  method; the files' order is ``os.listdir``'s there, the export's here). The preprocessing
  makes one instance per ``train_messages`` prefix that ends with a call ("Step N", N the
  index of that call in the path: ``{"id": "Step N: <query>", "conversations": [...]}``), so a
  record of k calls (``Finish`` included) gives k instances, each the path up to that call.
  Roles are system/user/assistant/function; the system prompt gets ToolBench's format
  instruction and ``Specifically, you have access to the following APIs:`` with the functions;
  a call becomes ``"\\nThought: …\\nAction: name\\nAction Input: {…}"``, whose Thought is the
  text of the text-only assistant messages just before it (``"\\nThought: "`` when there are
  none): the text of the call's own message is not read, and a prefix that ends with a
  text-only assistant message gives no instance. A trainer that wants the record's whole path
  with its text reads ``train_messages``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from toolfactory.export.base import Exporter, ExportOptions
from toolfactory.export.output import JsonList, OutputDir
from toolfactory.export.stats import ExportStats
from toolfactory.export.turns import FINISH, all_calls, arguments_object, finished_path, function_dict, responses
from toolfactory.stages.verify.export_policy import FINISH_ADDED
from toolfactory.models import Dialogue, Function, ToolCall, stable_id
from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.stages.dialogues.search import FAILED

STEP_PHRASE = "with a function call to actually excute your step."  # sic: ToolBench's prompt
FORMAT_INSTRUCTION = " Your output should follow this format:\nThought:\nAction\nAction Input:\n"
APIS = "\nSpecifically, you have access to the following APIs: "
ANSWERS = "answer"  # the folder of answer files, cleared when an export starts or fails


# ToolBench's DFSDT system prompt, as its released answers carry it (Apache-2.0); the task
# description lists the record's tools. It holds STEP_PHRASE, which ToolBench's preprocessing asserts.
TOOLBENCH_SYSTEM = (
    "You are AutoGPT, you can use many tools(functions) to do the following task.\n"
    "First I will give you the task description, and your task start.\n"
    "At each step, you need to give your thought to analyze the status now and what to do next, " + STEP_PHRASE + "\n"
    "After the call, you will get the call result, and you are now in a new state.\n"
    "Then you will analyze your status now, then decide what to do next...\n"
    "After many (Thought-call) pairs, you finally perform the task, then you can give your finial answer.\n"
    "Remember: \n"
    "1.the state change is irreversible, you can't go back to one of the former state, if you want to restart the task, "
    "say \"I give up and restart\".\n"
    "2.All the thought is short, at most in 5 sentence.\n"
    "3.You can do more then one trys, so if your plan is to continusly try some conditions, you can do one of the "
    "conditions per try.\n"
    "Let's Begin!\n"
    "Task description: You should use functions to help handle the real time user querys. Remember:\n"
    "1.ALWAYS call \"Finish\" function at the end of the task. And the final answer should contain enough information "
    "to show to the user,If you can't handle the task, or you find that function calls always fail(the function is not "
    "valid now), use function Finish->give_up_and_restart.\n"
    "2.Do not use origin tool names, use only subfunctions' names.\n"
    "You have access of the following tools:\n"
)
DFS = "DFS_woFilter_w2"  # ToolBench's method names (the --method choices of its preprocessing)
COT = "CoT@1"
_RELEASED = re.compile(r"^[^_]+_.*(?:DFS_woFilter_w2|CoT@1)$")  # a name ToolBench gave: kept
_QUERY_ID = re.compile(r"^[A-Za-z0-9-]+$")


def method_of(dialogue: Dialogue) -> str:
    search = dialogue.generation.get("search")
    return DFS if isinstance(search, dict) and search.get("method") == "dfsdt" else COT


def file_name(dialogue: Dialogue) -> str:
    """``<query_id>_<method>`` (see the module doc)."""
    if _RELEASED.match(dialogue.id):
        return dialogue.id
    query_id = dialogue.id if _QUERY_ID.match(dialogue.id) else stable_id(dialogue.id)
    return f"{query_id}_{method_of(dialogue)}"


def toolbench_system(dialogue: Dialogue) -> str:
    """The record's system prompt when it is ToolBench's, else ToolBench's listing the record's tools."""
    own = next((m.content or "" for m in dialogue.messages[:1] if m.role == "system"), "")
    if STEP_PHRASE in own:
        return own
    names = [t.name for t in dialogue.source_tools] or [f.name for f in dialogue.tools]
    return TOOLBENCH_SYSTEM + "".join(f"{i}.{name}\n" for i, name in enumerate(names, 1))


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


def path_messages(dialogue: Dialogue) -> tuple[list[dict[str, Any]], ToolCall]:
    """The whole path in ToolBench's message shape (see the module doc), and the Finish call."""
    messages, finish = finished_path(dialogue)
    answers = responses(dialogue)
    called = {c.id for c in all_calls(dialogue)}
    out: list[dict[str, Any]] = [{"role": "system", "content": toolbench_system(dialogue)}]
    for message in messages:
        if message.role == "system":
            continue  # ToolBench's prompt (above) replaces the record's
        if message.role == "user":
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


def _candidate(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The path as one of ToolBench's ``compare_candidates``: its nodes below the root, in order."""
    nodes: list[dict[str, Any]] = []

    def node(kind: str, description: str, **extra: Any) -> None:
        nodes.append({"is_terminal": False, "pruned": False, "finished": False, "depth": len(nodes) + 1,
                      "node_type": kind, "description": description, **extra})

    for k, message in enumerate(path):
        if message["role"] != "assistant":
            continue
        if message.get("content"):
            node("Thought", message["content"])
        call = message.get("function_call")
        if call:
            following = path[k + 1] if k + 1 < len(path) else {}
            observation = following.get("content") if following.get("role") == "function" else ""
            node("Action", call["name"])
            node("Action Input", call["arguments"], observation=observation or "")
    if nodes:
        nodes[-1]["is_terminal"] = True
    for item in nodes:
        item["finished"] = True
    return nodes


def search_tree(search: dict[str, Any]) -> dict[str, Any] | None:
    """The record's search tree (``generation.search.tree``: nodes with id, parent, depth, kind and
    calls) in ToolBench's nested shape, or None when the record keeps no tree."""
    nodes = search.get("tree")
    if not isinstance(nodes, list) or not nodes:
        return None
    root: dict[str, Any] = {"node_type": "Action Input", "description": "", "depth": 0, "is_terminal": False,
                            "pruned": False, "finished": False, "children": []}
    by_id: dict[int, dict[str, Any]] = {0: root}
    for item in sorted(nodes, key=lambda n: int(n.get("id", 0))):
        kind = str(item.get("kind", ""))
        made = {"node_type": "Action", "description": ", ".join(item.get("calls") or []) or kind, "kind": kind,
                "depth": int(item.get("depth", 0)), "expand_num": int(item.get("sample", 0)),
                # Every kind that ends its branch without an answer (a give-up, an invalid Finish, a
                # call or an answer the rules reject, a cut at max_depth) is a pruned leaf.
                "is_terminal": kind == "give_answer" or kind in FAILED, "pruned": kind in FAILED,
                "finished": kind == "give_answer", "children": []}
        by_id.get(int(item.get("parent", 0)), root)["children"].append(made)
        by_id[int(item.get("id", 0))] = made
    return {"size": len(nodes), "max_length": max(int(n.get("depth", 0)) for n in nodes), "tree": root}


def forward_args(dialogue: Dialogue) -> dict[str, Any]:
    """ToolBench's search arguments, with what the record recorded of them (null otherwise)."""
    search = dialogue.generation.get("search") if isinstance(dialogue.generation.get("search"), dict) else {}
    if method_of(dialogue) == COT:
        return {"single_chain_max_step": search.get("max_depth"), "pass_at": 1}
    return {"single_chain_max_step": search.get("max_depth"), "tree_beam_size": search.get("max_children"),
            "max_query_count": search.get("max_calls"), "answer": 1, "with_filter": False}


def answer_file(dialogue: Dialogue) -> dict[str, Any]:
    path, finish = path_messages(dialogue)
    return_type = arguments_object(finish).get("return_type")
    functions = [toolbench_function(f) for f in dialogue.tools]
    if not any(f.name == FINISH for f in dialogue.tools):
        functions.append(function_dict(FINISH_FUNCTION))
    search = dialogue.generation.get("search")
    tree = search_tree(search) if isinstance(search, dict) else None
    head: dict[str, Any] = {"win": return_type == "give_answer"}
    if tree is not None:
        head["tree"] = tree
    return {**head, "forward_args": forward_args(dialogue), "compare_candidates": [_candidate(path)], "answer_generation": {
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


def toolllama_instances(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """ToolLLaMA's training instances of an answer file, as ToolBench's preprocessing makes them
    (see the module doc): one per ``train_messages`` prefix that ends with a call, id
    ``Step <index of that call>: <query>``.

    The prefixes are those of the whole path, so one walk over it yields them all: each call
    closes the instance of the prefix that ends with it. A call's Thought is the text of the
    text-only assistant messages just before it; the text of the call's own message is not
    kept, as the preprocessing reads only ``function_call`` from such a message. A prefix that
    ends with a text-only assistant message (an answer between two user turns, a thought
    before ``Finish``) is no instance."""
    generation = answer["answer_generation"]
    if not generation["valid_data"] or not generation["train_messages"]:
        return []
    path, query, functions = generation["train_messages"][-1], generation["query"], generation["function"]
    instances: list[dict[str, Any]] = []
    conversations: list[dict[str, Any]] = []
    thought = ""
    for index, message in enumerate(path):
        role = message["role"]
        if role != "assistant":
            value = toolllama_system(message["content"], functions) if role == "system" else message["content"]
            conversations.append({"from": role, "value": value})
            thought = ""  # a thought is kept only for the call that directly follows it
        elif "function_call" not in message:
            thought += f"\nThought: {message['content'] or ''}"
        else:
            call = message["function_call"]
            react = (thought or "\nThought: ") + f"\nAction: {call['name']}\nAction Input: {call['arguments']}"
            conversations.append({"from": "assistant", "value": react})
            thought = ""
            instances.append({"id": f"Step {index}: {query}", "conversations": list(conversations)})
    return instances


class ToolBenchExporter(Exporter):
    name = "toolbench"
    read_as = "toolbench"  # each answer file is a record, named by its file

    def __init__(self, out: OutputDir, splits: Sequence[str], options: ExportOptions) -> None:
        super().__init__(out, splits, options)
        self.toolllama = {s: JsonList(out, f"toolllama/{s}.json") for s in self.splits}
        self.answers = {s: 0 for s in self.splits}
        out.clear(ANSWERS)

    def write(self, split: str, dialogue: Dialogue) -> None:
        text = json.dumps(answer_file(dialogue), ensure_ascii=False)
        self.out.write_bytes(f"{ANSWERS}/{split}/{file_name(dialogue)}.json", text.encode())
        self.answers[split] += 1
        self.note(file_name(dialogue), dialogue.recipe, None if any(c.name == FINISH for c in all_calls(dialogue)) else FINISH_ADDED)
        # built from the file's text, read back, so the instances are those of what was written
        for instance in toolllama_instances(json.loads(text)):
            self.toolllama[split].write(instance)

    def close(self, stats: ExportStats) -> dict[str, int]:
        files = {f"{ANSWERS}/{s}/": n for s, n in self.answers.items()}
        return {**files, **{f"toolllama/{s}.json": file.commit() for s, file in self.toolllama.items()}}

    def abort(self) -> None:
        for file in self.toolllama.values():
            file.discard()
        self.out.clear(ANSWERS)
