"""How the simulator answers a chat completion request, in OpenAI's wire format.

Decision order for each choice:

1. function tools offered, `tool_choice` not "none", last message not a tool result
   -> one tool call: the function sharing most words with the last user message (or the one
   `tool_choice` names), with arguments generated from its `parameters` schema;
2. otherwise the answer is text: after tool results a short summary quoting them, else a
   sentence reusing the user's words; with a JSON `response_format` the text is instead a JSON
   value (an instance of the given schema, or a small object for `json_object`).

Content faults (see :mod:`.faults`) are then applied. Everything random is drawn from the
request hash and the choice index, so the same request body always gets the same answer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from . import faults as fault_lib
from .errors import SimulatorError
from .schema_instance import instance_for
from .seeding import canonical_json, derive_rng, sub_hash
from .settings import SimulatorSettings
from .text import (
    STOPWORDS,
    content_words,
    estimate_tokens,
    identifier_words,
    lower_words,
    message_text,
    topical_answer,
    truncate_words,
)

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
MAX_CHOICES = 128
SYSTEM_FINGERPRINT = "fp_toolfactory_sim"
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class FunctionSpec:
    """One offered function tool."""

    name: str
    description: str
    parameters: dict[str, Any]

    def words(self) -> set[str]:
        return set(identifier_words(self.name)) | {
            w for w in lower_words(self.description) if w not in STOPWORDS
        }


@dataclass
class Conversation:
    """The parts of a request the answer depends on."""

    messages: list[dict[str, Any]]
    user_text: str
    context: list[str]
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    call_names: dict[str, str] = field(default_factory=dict)


def _require(condition: bool, message: str, param: str | None = None) -> None:
    if not condition:
        raise SimulatorError(message, param=param, code="invalid_request")


def parse_conversation(body: dict[str, Any]) -> Conversation:
    """Validate `messages` and pull out the user's words and any trailing tool results."""
    messages = body.get("messages")
    _require(
        isinstance(messages, list) and bool(messages),
        "'messages' must be a non-empty array.",
        "messages",
    )
    assert isinstance(messages, list)
    for index, message in enumerate(messages):
        _require(
            isinstance(message, dict) and message.get("role") in ROLES,
            f"Invalid message at messages[{index}]: needs a known 'role'.",
            f"messages[{index}]",
        )
    users = [m for m in messages if m["role"] == "user"]
    user_text = (
        message_text(users[-1].get("content"))
        if users
        else " ".join(message_text(m.get("content")) for m in messages)
    )
    call_names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                call_names[str(call.get("id"))] = str(call["function"].get("name", ""))
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message["role"] not in ("tool", "function"):
            break
        trailing.insert(0, message)
    return Conversation(messages, user_text, content_words(user_text), trailing, call_names)


def parse_functions(body: dict[str, Any]) -> list[FunctionSpec]:
    """The function tools of the request (other tool types are ignored)."""
    tools = body.get("tools")
    if tools is None:
        return []
    _require(isinstance(tools, list), "'tools' must be an array.", "tools")
    specs: list[FunctionSpec] = []
    for index, tool in enumerate(tools):
        _require(isinstance(tool, dict), f"Invalid tool at tools[{index}].", f"tools[{index}]")
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        _require(
            isinstance(function, dict) and isinstance(function.get("name"), str),
            f"tools[{index}].function.name is required.",
            f"tools[{index}].function",
        )
        parameters = function.get("parameters")
        specs.append(
            FunctionSpec(
                name=function["name"],
                description=str(function.get("description") or ""),
                parameters=parameters if isinstance(parameters, dict) else dict(EMPTY_PARAMETERS),
            )
        )
    return specs


def _named(entry: Any) -> str | None:
    """The function name in a tool_choice-like entry, either wire shape."""
    if not isinstance(entry, dict):
        return None
    function = entry.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return entry["name"] if isinstance(entry.get("name"), str) else None


def callable_functions(body: dict[str, Any], functions: list[FunctionSpec]) -> list[FunctionSpec]:
    """The functions the answer may call given `tool_choice` (empty: answer in text)."""
    choice = body.get("tool_choice")
    if not functions or choice == "none":
        return []
    if choice is None or choice in ("auto", "required"):
        return functions
    by_name = {spec.name: spec for spec in functions}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools") or {}
        names = [_named(entry) for entry in allowed.get("tools") or []]
        chosen = [by_name[name] for name in names if name in by_name]
        _require(
            bool(chosen), "tool_choice.allowed_tools names no offered function.", "tool_choice"
        )
        return chosen
    name = _named(choice)
    _require(name is not None, "Invalid 'tool_choice'.", "tool_choice")
    _require(
        name in by_name, f"tool_choice names '{name}', which is not in 'tools'.", "tool_choice"
    )
    return [by_name[str(name)]]


def choose_function(
    functions: list[FunctionSpec], context: list[str], rng: random.Random
) -> FunctionSpec:
    """The function sharing most words with the user's message (ties: a seeded pick)."""
    wanted = {w.lower() for w in context}
    wanted |= {w[:-1] for w in wanted if w.endswith("s") and len(w) > 3}
    scores = [len(spec.words() & wanted) for spec in functions]
    best = max(scores)
    return rng.choice(
        [spec for spec, score in zip(functions, scores, strict=True) if score == best]
    )


def _summary(content: str) -> str:
    """A few words quoting a tool result (JSON results become 'key is value' phrases)."""
    try:
        data = json.loads(content)
    except ValueError:
        text = " ".join(content.split())
        return text if len(text) <= 160 else text[:157] + "..."
    if isinstance(data, dict):
        facts = [
            f"{str(key).replace('_', ' ')} is {value}"
            for key, value in data.items()
            if isinstance(value, (str, int, float, bool))
        ][:4]
        nested = [
            str(key).replace("_", " ")
            for key, value in data.items()
            if isinstance(value, (dict, list))
        ][:2]
        if nested:
            facts.append("details on " + " and ".join(nested))
        return ", ".join(facts) if facts else "an empty result"
    if isinstance(data, list):
        head = f"{len(data)} result{'s' if len(data) != 1 else ''}"
        return f"{head}, the first being {_summary(json.dumps(data[0]))}" if data else "no results"
    return str(data)


_RESULT_OPENERS = ("Here is what I found", "Based on the results", "Done", "Good news")


def tool_result_answer(conversation: Conversation, rng: random.Random) -> str:
    """A short final answer that quotes the trailing tool results."""
    parts = []
    for message in conversation.tool_results:
        name = conversation.call_names.get(str(message.get("tool_call_id"))) or str(
            message.get("name") or "the tool"
        )
        parts.append(f"{name} returned {_summary(message_text(message.get('content')))}")
    answer = f"{rng.choice(_RESULT_OPENERS)}: {'; '.join(parts)}."
    topic = " ".join(conversation.context[:4])
    if topic:
        answer += f" That should answer your question about {topic}."
    return answer


def _json_format(body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """(is a JSON response requested, the schema if one was given)."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return False, None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        _require(
            isinstance(spec, dict), "response_format.json_schema is required.", "response_format"
        )
        assert isinstance(spec, dict)
        schema = spec.get("schema")
        return True, schema if isinstance(schema, dict) else None
    return fmt.get("type") == "json_object", None


def _json_answer(
    schema: dict[str, Any] | None, text: str, context: list[str], rng: random.Random, true_rate: float
) -> str:
    if schema is None:
        value: Any = {"answer": text, "keywords": [w.lower() for w in context[:5]]}
    else:
        value = instance_for(schema, rng, context, true_rate=true_rate)
    return json.dumps(value, ensure_ascii=False)


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _tool_call_choice(
    index: int,
    functions: list[FunctionSpec],
    all_names: list[str],
    conversation: Conversation,
    faults: fault_lib.ContentFaults,
    request_hash: str,
    rng: random.Random,
) -> tuple[dict[str, Any], str]:
    spec = (
        functions[0]
        if len(functions) == 1
        else choose_function(functions, conversation.context, rng)
    )
    arguments = instance_for(spec.parameters, rng, conversation.context)
    if not isinstance(arguments, dict):
        arguments = {}
    name = spec.name
    if faults.hallucinated_function:
        shape = fault_lib.fault_rng(request_hash, "hallucinated", index)
        name = fault_lib.hallucinated_name(name, all_names, conversation.context, shape)
    if faults.missing_required:
        fault_lib.drop_required(
            arguments, spec.parameters, fault_lib.fault_rng(request_hash, "missing", index)
        )
    if faults.wrong_type:
        fault_lib.wrong_type(
            arguments, spec.parameters, fault_lib.fault_rng(request_hash, "wrong_type", index)
        )
    text = json.dumps(arguments, ensure_ascii=False)
    if faults.malformed_json:
        text = fault_lib.malform_json(text, fault_lib.fault_rng(request_hash, "malformed", index))
    call = {
        "id": "call_" + sub_hash(request_hash, "call", index)[:24],
        "type": "function",
        "function": {"name": name, "arguments": text},
    }
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
    return message, name + text


def complete_chat(
    body: dict[str, Any], settings: SimulatorSettings, request_hash: str
) -> dict[str, Any]:
    """The `chat.completion` object answering `body` (raises SimulatorError if invalid)."""
    model = body.get("model")
    _require(isinstance(model, str) and bool(model), "You must provide a model parameter.", "model")
    if body.get("stream"):
        raise SimulatorError(
            "Streaming is not supported by the toolfactory simulator.",
            code="stream_not_supported",
            param="stream",
        )
    count = body.get("n", 1)
    count = 1 if count is None else count
    _require(
        isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= MAX_CHOICES,
        f"'n' must be an integer in 1..{MAX_CHOICES}.",
        "n",
    )
    conversation = parse_conversation(body)
    functions = parse_functions(body)
    callable_ = callable_functions(body, functions)
    wants_json, schema = _json_format(body)
    limit = _max_tokens(body)

    choices: list[dict[str, Any]] = []
    completion_tokens = 0
    for index in range(count):
        rng = derive_rng(request_hash, "choice", index)
        faults = fault_lib.content_faults(settings, request_hash, index)
        finish = "stop"
        if callable_ and not conversation.tool_results:
            message, produced = _tool_call_choice(
                index,
                callable_,
                [f.name for f in functions],
                conversation,
                faults,
                request_hash,
                rng,
            )
            finish = "tool_calls"
        else:
            if conversation.tool_results:
                text = tool_result_answer(conversation, rng)
                context = conversation.context + [
                    w
                    for m in conversation.tool_results
                    for w in content_words(message_text(m.get("content")))
                ]
            else:
                text = topical_answer(conversation.user_text, rng)
                context = conversation.context
            if wants_json:
                text = _json_answer(schema, text, context, rng, settings.boolean_true_rate)
                if faults.malformed_json:
                    text = fault_lib.malform_json(
                        text, fault_lib.fault_rng(request_hash, "malformed", index)
                    )
            elif limit is not None and estimate_tokens(text) > limit:
                text, finish = truncate_words(text, limit), "length"
            message = {"role": "assistant", "content": text, "refusal": None}
            produced = text
        completion_tokens += estimate_tokens(produced)
        choices.append(
            {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        )

    prompt_text = " ".join(message_text(m.get("content")) for m in conversation.messages)
    prompt_tokens = estimate_tokens(prompt_text) + 3 * len(conversation.messages)
    if functions:
        prompt_tokens += estimate_tokens(canonical_json(body.get("tools")))
    return {
        "id": "chatcmpl-" + request_hash[:24],
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
