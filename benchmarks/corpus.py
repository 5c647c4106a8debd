"""Valid, varied dialogues built from the seed catalog: the clean half of the rule layer's
labelled corpus (the other half is :mod:`toolfactory.stages.verify.corruption` applied to these),
for benchmarks and tests; no stage of a run makes them.

Each dialogue offers the functions of one or two seed-catalog tools and calls some of them with
arguments drawn by :func:`toolfactory.simulator.schema_instance.instance_for` (schema-valid
by construction; a draw that does not validate is redrawn), answered by tool messages shaped as
the dialogues stage shapes them (``{"status_code": 200, "response": ...}``, the response drawn
from the function's ``returns`` schema). Shapes rotate with the index so that every rule sees its
applicable structure: one call, sequential calls, parallel calls in one turn, two user turns,
ToolLLM-style paths ending with ``Finish(give_answer)``, non-tool dialogues (``mode="non_tool"``)
and conversations in Chinese. Every dialogue has at most five calls (``Finish`` included). The
argument values are the user's: the system prompt states them (the first user turn does where
there is no system prompt, in a Latin-script conversation), so that the grounding rules pass,
and no call converts a value to itself.
Everything is drawn from ``random.Random(seed, index)``: the same arguments give the same corpus.
"""

from __future__ import annotations

import json
import random
from typing import Any, Sequence

from toolfactory.catalog import load_seed_catalog
from toolfactory.definitions.finish import FINISH_ANSWERED, FINISH_FUNCTION
from toolfactory.models import Dialogue, Function, Message, Tool, ToolCall
from toolfactory.simulator.schema_instance import instance_for, is_valid_instance  # a data maker, like the simulator
from toolfactory.stages.verify.rules.contradiction import same_ends

SHAPES = ("single", "sequential", "parallel", "multi_turn", "finish", "non_tool", "chinese")
MAX_CALLS = 5

SYSTEM_PROMPT = (
    "You are a helpful assistant that can use the functions provided. Call a function when it "
    "helps to answer the request, with argument values taken from the conversation."
)

_USER_EN = (
    "Hi, could you help me with {tool}? {description} Please use sensible values for the details.",
    "I need some help from {tool}. {description} Thanks in advance!",
    "Can you take care of this with {tool}? {description}",
    "Hello! I'm planning ahead and {tool} should be able to help. {description} What do you find?",
)
_FOLLOW_UP_EN = (
    "Great, thank you. Could you also check one more thing for me?",
    "Thanks! One more request, please.",
)
_THOUGHTS_EN = (
    "Let me look that up with {name}.",
    "I will call {name} with the details you gave.",
    "First, I need the data from {name}.",
)
_OPENERS_EN = ("I checked this for you", "Here is what I found", "Good news", "All done")
_CLOSINGS_EN = (
    "Let me know if you need anything else.",
    "Would you like me to look into more details?",
    "I hope this helps!",
    "Tell me if I should change any of the options, for example the dates or the number of results.",
)
_USER_ZH = (
    "你好，请帮我用{tool}查询一下相关的信息，谢谢。",
    "我想用{tool}办一件事，请帮我处理一下。",
)
_ANSWER_ZH = (
    "我已经调用了{names}，请求已经成功完成，一共返回了{count}项数据。如果您还需要其他帮助，请随时告诉我。",
    "好的，{names}的结果已经出来了，共有{count}项内容，所有数值都来自服务的返回结果。还有什么需要我帮忙的吗？",
)


def valid_dialogues(count: int, seed: int = 0, tools: Sequence[Tool] | None = None) -> list[Dialogue]:
    """`count` valid dialogues (see the module doc), deterministic in (`count`, `seed`)."""
    catalog = list(tools) if tools is not None else load_seed_catalog()
    catalog = [tool for tool in catalog if tool.functions]
    return [_dialogue(SHAPES[i % len(SHAPES)], random.Random(seed * 1_000_003 + i), catalog, seed, i) for i in range(count)]


class _Builder:
    def __init__(self, rng: random.Random, functions: list[Function]) -> None:
        self.rng = rng
        self.functions = functions
        self.ids: set[str] = set()
        self.results: list[tuple[str, dict[str, Any]]] = []

    def call_id(self) -> str:
        while True:
            candidate = f"call_{self.rng.getrandbits(48):012x}"
            if candidate not in self.ids:
                self.ids.add(candidate)
                return candidate

    def arguments(self, function: Function, words: list[str]) -> dict[str, Any] | None:
        for _ in range(6):
            value = instance_for(function.parameters, self.rng, words)
            if isinstance(value, dict) and is_valid_instance(function.parameters, value) \
                    and not same_ends(function.name, value, function.description):
                return value
        return None

    def calls(self, count: int, words: list[str]) -> list[tuple[ToolCall, Message]]:
        """`count` calls of offered functions with valid arguments, each with its response."""
        out: list[tuple[ToolCall, Message]] = []
        attempts = 0
        while len(out) < count and attempts < 20 * count:
            attempts += 1
            function = self.rng.choice(self.functions)
            arguments = self.arguments(function, words)
            if arguments is None:
                continue
            call = ToolCall(id=self.call_id(), name=function.name, arguments=json.dumps(arguments, ensure_ascii=False))
            response = instance_for(function.returns, self.rng, words)
            if not isinstance(response, dict):
                response = {"result": response}
            self.results.append((function.name, response))
            body = json.dumps({"status_code": 200, "response": response}, ensure_ascii=False)
            out.append((call, Message(role="tool", tool_call_id=call.id, name=function.name, content=body)))
        return out

    def call_turn(self, pairs: list[tuple[ToolCall, Message]], thought: bool) -> list[Message]:
        if not pairs:
            return []
        names = ", ".join(dict.fromkeys(call.name for call, _ in pairs))
        content = self.rng.choice(_THOUGHTS_EN).format(name=names) if thought else None
        reasoning = f"The request needs {names}; the argument values come from the conversation." if self.rng.random() < 0.3 else None
        turn = Message(role="assistant", content=content, reasoning=reasoning, tool_calls=[call for call, _ in pairs])
        return [turn, *(response for _, response in pairs)]

    def answer_en(self) -> str:
        rng = self.rng
        names = list(dict.fromkeys(name for name, _ in self.results))
        fields = sum(len(response) for _, response in self.results)
        summary = (
            f"{rng.choice(_OPENERS_EN)}: I called {' and '.join(names)}, and the request completed "
            f"without errors with {fields} field{'s' if fields != 1 else ''} in the response."
        )
        detail = ""
        for _, response in self.results:
            scalar = next(((k, v) for k, v in response.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)), None)
            if scalar is not None:
                value = str(scalar[1])[:60].strip()
                detail = f" The {str(scalar[0]).replace('_', ' ')} is {value}, according to the service."
                break
        return f"{summary}{detail} {rng.choice(_CLOSINGS_EN)}"


def _dialogue(shape: str, rng: random.Random, catalog: list[Tool], seed: int, index: int) -> Dialogue:
    tool = rng.choice(catalog)
    offered = list(tool.functions)
    if rng.random() < 0.3:
        other = rng.choice(catalog)
        if other.name != tool.name:
            offered += [fn for fn in other.functions if fn.name not in {f.name for f in offered}]
    builder = _Builder(rng, offered)
    words = [w.strip(".,!?'\"()").lower() for w in f"{tool.name} {tool.description}".split()]
    words = [w for w in words if w.isalpha() and len(w) > 2]
    description = tool.description.strip()
    if description and description[-1] not in ".!?":
        description += "."
    user = rng.choice(_USER_EN).format(tool=tool.name, description=description)
    messages = [Message(role="system", content=SYSTEM_PROMPT)] if rng.random() < 0.85 else []
    mode = "multiple" if shape in ("sequential", "parallel", "multi_turn", "finish") else "single"
    tools = offered

    if shape == "non_tool":
        mode = "non_tool"
        messages += [
            Message(role="user", content=f"Hi! What can {tool.name} do for me, in a few words?"),
            Message(role="assistant", content=f"{tool.name} helps with the following: {description} Just tell me what you need, and I will take care of it."),
        ]
    elif shape == "chinese":
        messages.append(Message(role="user", content=rng.choice(_USER_ZH).format(tool=tool.name)))
        pairs = builder.calls(rng.randint(1, 2), words)
        messages += builder.call_turn(pairs, thought=False)
        names = "、".join(dict.fromkeys(call.name for call, _ in pairs))
        fields = sum(len(r) for _, r in builder.results)
        messages.append(Message(role="assistant", content=rng.choice(_ANSWER_ZH).format(names=names, count=fields)))
    elif shape == "multi_turn":
        messages.append(Message(role="user", content=user))
        messages += builder.call_turn(builder.calls(rng.randint(1, 2), words), thought=rng.random() < 0.5)
        messages.append(Message(role="assistant", content=builder.answer_en()))
        builder.results.clear()
        messages.append(Message(role="user", content=rng.choice(_FOLLOW_UP_EN)))
        messages += builder.call_turn(builder.calls(rng.randint(1, 2), words), thought=rng.random() < 0.5)
        messages.append(Message(role="assistant", content=builder.answer_en()))
    else:
        messages.append(Message(role="user", content=user))
        if shape == "single":
            turns = [1]
        elif shape == "sequential":
            turns = [1] * rng.randint(2, MAX_CALLS)
        elif shape == "parallel":
            turns = [rng.randint(2, 3)] + ([1] if rng.random() < 0.5 else [])
        else:  # finish: up to four calls, then Finish
            turns = [1] * rng.randint(1, MAX_CALLS - 1)
        for size in turns:
            messages += builder.call_turn(builder.calls(size, words), thought=rng.random() < 0.4)
        answer = builder.answer_en()
        if shape == "finish":
            tools = [*offered, FINISH_FUNCTION]
            finish = ToolCall(id=builder.call_id(), name="Finish", arguments=json.dumps({"return_type": "give_answer", "final_answer": answer}))
            messages += [
                Message(role="assistant", tool_calls=[finish]),
                Message(role="tool", tool_call_id=finish.id, name="Finish", content=FINISH_ANSWERED),
            ]
        messages.append(Message(role="assistant", content=answer))

    _state_values(messages, shape)
    return Dialogue(
        id=f"valid-{seed}-{index:05d}-{shape}",
        task_id=f"task-{seed}-{index:05d}",
        tools=tools,
        messages=messages,
        recipe="verifier-corpus",
        scenario="multi_tool" if len({fn.name for fn in offered}) > len(tool.functions) else "single_tool",
        mode=mode,
    )


def _state_values(messages: list[Message], shape: str) -> None:
    """Give the calls' argument values to the conversation (module doc)."""
    given = [json.loads(call.arguments) for m in messages for call in m.tool_calls or [] if call.name != "Finish"]
    if not given:
        return
    details = f"The details: {json.dumps(given, ensure_ascii=False)}"
    if messages[0].role == "system":
        messages[0] = messages[0].model_copy(update={"content": f"{messages[0].content} {details}"})
    elif shape == "chinese":
        messages.insert(0, Message(role="system", content=details))
    else:
        first = next(i for i, m in enumerate(messages) if m.role == "user")
        messages[first] = messages[first].model_copy(update={"content": f"{messages[first].content} {details}"})


__all__ = ["MAX_CALLS", "SHAPES", "valid_dialogues"]
