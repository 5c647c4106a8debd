"""The ToolLLaMA file of the ToolBench export is what ToolBench's ``preprocess_toolllama_data.py``
makes of the exported answer files. The preprocessing's rules are restated here from the
script, per answer file and per ``train_messages`` prefix as it walks them, so the test does
not trust the exporter's single walk over the path:

* it reads the files of a folder whose name contains the method, and skips ``valid_data`` false;
* for each prefix, a non-assistant message is a turn of its role (the system prompt through
  ``process_system_message``, which asserts ToolBench's sentence) and clears the pending thought;
* an assistant message without ``function_call`` adds ``"\\nThought: <content>"`` to the pending
  thought, or, when it ends the prefix, ends it with no instance;
* an assistant message with ``function_call`` becomes ``<thought or "\\nThought: ">\\nAction: name
  \\nAction Input: arguments`` (its own content is not read); when it ends the prefix, the
  conversation so far is an instance ``{"id": "Step <its index>: <query>", "conversations"}``.

The script writes the instances of the files in ``os.listdir`` order, which no one fixes: the
export must be the concatenation of the files' instance lists in some order of the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolfactory.export import SPLITS, export_run
from toolfactory.models import Dialogue, Message, ToolCall
from toolfactory.storage import ObjectStore

from .helpers import RUN, open_store, write_run

METHODS = ("DFS_woFilter_w2", "CoT@1")  # the --method choices of the script
ASSERTED = "with a function call to actually excute your step."  # sic


def process_system_message(system: str, functions: list[dict[str, Any]]) -> str:
    """``toolbench.utils.process_system_message``."""
    assert ASSERTED in system
    system = system.replace(ASSERTED, ASSERTED + " Your output should follow this format:\nThought:\nAction\nAction Input:\n")
    return system + "\nSpecifically, you have access to the following APIs: " + str(functions)


def prefix_instance(prefix: list[dict[str, Any]], query: str, functions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The script's instance of one ``train_messages`` prefix (None when it makes none)."""
    conversations: list[dict[str, Any]] = []
    react = ""
    for index, message in enumerate(prefix):
        role, content = message["role"], message["content"]
        last = index + 1 == len(prefix)
        if role != "assistant":
            value = process_system_message(content, functions) if role == "system" else content
            conversations.append({"from": role, "value": value})
            react = ""
            continue
        if "function_call" not in message:
            if last:
                return None
            react += f"\nThought: {content if content is not None else ''}"
            continue
        if react == "":
            react = "\nThought: "
        react += f"\nAction: {message['function_call']['name']}\nAction Input: {message['function_call']['arguments']}"
        conversations.append({"from": role, "value": react})
        react = ""
        if last:
            return {"id": f"Step {index}: {query}", "conversations": conversations}
    return None  # the prefix does not end with an assistant message


def preprocess(folder: Path, method: str) -> list[list[dict[str, Any]]]:
    """Each file's instances, for the files of `folder` the script reads for `method`."""
    per_file = []
    for name in sorted(p.name for p in folder.iterdir()):
        if method not in name:
            continue
        generation = json.loads((folder / name).read_text())["answer_generation"]
        if not generation["valid_data"]:
            continue
        made = [prefix_instance(prefix, generation["query"], generation["function"]) for prefix in generation["train_messages"]]
        per_file.append([instance for instance in made if instance is not None])
    return per_file


def assert_concatenation(ours: list[dict[str, Any]], per_file: list[list[dict[str, Any]]]) -> None:
    """`ours` is the files' instance lists one after another, in some order of the files."""
    remaining = [instances for instances in per_file if instances]
    at = 0
    while remaining:
        match = next((k for k, instances in enumerate(remaining) if ours[at:at + len(instances)] == instances), None)
        assert match is not None, f"instance {at} of the export ({ours[at]['id'] if at < len(ours) else 'none'!r}) starts no file's instances"
        at += len(remaining.pop(match))
    assert at == len(ours), f"{len(ours) - at} instance(s) of the export come from no answer file"


def toolllama(folder: Path, split: str) -> list[dict[str, Any]]:
    path = folder / f"toolllama/{split}.json"
    return json.loads(path.read_text()) if path.exists() else []


def test_toolllama_is_what_toolbench_preprocessing_makes_of_the_answer_files(run_store: ObjectStore, dialogues: list[Dialogue],
                                                                               tmp_path: Path) -> None:
    summary = export_run(run_store, RUN, "toolbench", tmp_path)
    total = 0
    for split in SPLITS:
        folder = tmp_path / "answer" / split
        ours = toolllama(tmp_path, split)
        per_file = [i for m in METHODS for i in preprocess(folder, m)] if folder.is_dir() else []
        assert_concatenation(ours, per_file)
        total += len(ours)
    # one instance per step, not per record: every record has at least its Finish step
    assert total > summary["exported"] == len(dialogues)


def test_a_thought_is_the_text_before_a_call_not_the_call_s_own_text(dialogues: list[Dialogue], tmp_path: Path) -> None:
    base = next(d for d in dialogues if d.messages[0].role == "system")
    system, user = base.messages[0], next(m for m in base.messages if m.role == "user")
    call = ToolCall(id="c1", name=base.tools[0].name, arguments="{}")
    finish = ToolCall(id="c2", name="Finish", arguments=json.dumps({"return_type": "give_answer", "final_answer": "done"}))
    messages = [system, user, Message(role="assistant", content="Said with the call.", tool_calls=[call]),
                Message(role="tool", tool_call_id="c1", name=call.name, content="{}"),
                Message(role="assistant", content="Thought before Finish."),
                Message(role="assistant", tool_calls=[finish])]
    record = base.model_copy(update={"id": "thoughts", "messages": messages})
    store = open_store(tmp_path / "store")
    write_run(store, [record])
    export_run(store, RUN, "toolbench", tmp_path / "out")
    (split,) = [s for s in SPLITS if (tmp_path / "out" / "answer" / s).is_dir() and any((tmp_path / "out" / "answer" / s).iterdir())]
    ours = toolllama(tmp_path / "out", split)
    assert_concatenation(ours, [i for m in METHODS for i in preprocess(tmp_path / "out" / "answer" / split, m)])
    # the call's own text is not read; the text-only message before Finish is its Thought, and
    # the prefix that ends with that message is no instance
    assert [i["id"].split(":")[0] for i in ours] == ["Step 2", "Step 5"]
    assert ours[0]["conversations"][-1]["value"].startswith("\nThought: \nAction: ")
    assert ours[1]["conversations"][-1]["value"].startswith("\nThought: Thought before Finish.\nAction: Finish\n")


def test_toolllama_of_released_answers_is_what_toolbench_makes_of_them(shared_data: Path, real_store: ObjectStore, tmp_path: Path) -> None:
    export_run(real_store, RUN, "toolbench", tmp_path)
    ours = [i for s in SPLITS for i in toolllama(tmp_path, s)]
    released = [i for m in METHODS for i in preprocess(shared_data / "toolbench/answer/G1_answer", m)]
    assert_concatenation(ours, released)
    assert len(ours) == sum(len(instances) for instances in released) > len([r for r in released if r])
