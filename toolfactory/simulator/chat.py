"""How the simulator answers a chat completion request, in OpenAI's wire format.

Decision order for each choice (the knobs are :class:`SimulatorSettings` fields; each "draw"
is a seeded draw against that rate, see :mod:`.tool_turns`):

1. no function tool may be called (no `tools`, or `tool_choice` "none") -> text (step 5);
2. the last message is a tool result -> when it is an error (a JSON body with a 4xx/5xx
   `status_code` or an `error` key, or a text that opens as an error message, as an MCP
   server's "Error executing tool ..."), the failed function is called again with new
   arguments, never with a value the error quotes ("No time zone found with key X"), as a
   model retries after reading the error (fewer than 3 tool-call turns); otherwise another
   tool call if the conversation has had fewer than 3 tool-call turns and the
   `rate_follow_up_call` draw hits (preferably a function not
   called yet that the request or the results relate to, then the one most of whose
   parameters the results can fill, e.g. search -> book), else text (step 5);
3. `tool_choice` forces a call ("required", a named function, allowed tools in "required"
   mode) -> a tool call. Otherwise, with `decline_when_irrelevant` on, a last user message
   sharing no word stem with any callable function's name, description, parameter names or
   enum values (nor a value they take, like a city for `city`) -> a decline (a plain text
   answer if it has no content word at all, like "hi"); then, while the conversation holds
   no tool result and no earlier assistant text (a model asks or declines once, then acts on
   the user's reply): the `rate_decline` draw -> a decline, then the `rate_clarify` draw ->
   a question asking for one required parameter of the function that would be called (a
   call after all if it requires none). When a function offered is one that asks the user
   (its description says so, like ToolAlpaca's `getDetails`), the question is a call to it,
   and it is never called otherwise;
4. a tool call: the function sharing most words with the last user message (or the only one
   `tool_choice` allows), with arguments generated from its `parameters` schema. Top-level
   arguments named like a key of an earlier tool result take that value when it validates
   (see :mod:`.grounding`). If the `rate_parallel_calls` draw hits (and the request does not
   set `parallel_tool_calls: false`) the turn holds 2-3 calls, each with its own id: the
   first is the call of a single-call turn, the others go to other functions related to the
   request or the results, else repeat the function with other argument values. A choice
   that follows the request (the `obedience` draw) takes the values the user's messages state
   (see :mod:`.mentions`): it prefers the function they give all required values, calls in
   parallel the other functions they give values for (or repeats one per stated value), and,
   for a request that spells its values out, leaves out the optional arguments it does not give;
5. text: after tool results a short summary quoting them, else a sentence reusing the user's
   words (or the decline / question of step 3); with a JSON `response_format` the text is
   instead a JSON value (an instance of the given schema, or a small object for
   `json_object`; a choice between an API's success and error responses is answered by
   validating the quoted request, see :mod:`.api_requests`).

Content faults (see :mod:`.faults`) are then applied (to the first call of a parallel turn).
Everything random is drawn from the request hash and the choice index, so the same request
body always gets the same answer. With the behaviour knobs at 0 (and off) the answers are
those of a simulator without them, except for the always-on grounding, which only matters
once a conversation holds tool results and then asks for a new call.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from . import faults as fault_lib
from . import profiles
from .api_requests import api_answer
from .errors import SimulatorError
from .functions import (
    FunctionSpec,
    call_is_forced,
    callable_functions,
    choose_function,
    is_relevant,
    parse_functions,
)
from .grounding import result_values
from .prompt_json import schema_in_prompt
from .instructions import obeys, requested_mode, write_for_mode, writing_prompt
from .reading import read_choices
from .replies import answer_question
from .schema_instance import OPTIONAL_PROBABILITY, instance_for
from .seeding import canonical_json, derive_rng, sub_hash
from .verdicts import settle
from .settings import SimulatorSettings
from .text import content_words, estimate_tokens, message_text, topical_answer
from .text_mode import as_text, ask_with, asks_user, declared_format, structured_body, system_text
from .tool_turns import (
    ToolHistory,
    Turn,
    clarify_question,
    decide_turn,
    decline_answer,
    is_error_result,
    refused_values,
    plan_calls,
    wants_parallel,
)

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
RESULT_ROLES = ("tool", "function")
MAX_CHOICES = 128
SYSTEM_FINGERPRINT = "fp_toolfactory_sim"  # signs every answer (toolfactory/llm/identity.py)


@dataclass
class Conversation:
    """The parts of a request the answer depends on."""

    messages: list[dict[str, Any]]
    user_text: str
    context: list[str]
    said: list[str] = field(default_factory=list)  # every user message's text, latest first
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    call_names: dict[str, str] = field(default_factory=dict)
    history: ToolHistory = field(default_factory=ToolHistory)


def _require(condition: bool, message: str, param: str | None = None) -> None:
    if not condition:
        raise SimulatorError(message, param=param, code="invalid_request")


def _earlier_calls(messages: list[dict[str, Any]]) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """(assistant turns with tool calls, parsed arguments of every earlier call by name)."""
    rounds = 0
    calls: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        if message["role"] != "assistant":
            continue
        made = [c["function"] for c in message.get("tool_calls") or [] if _is_call(c)]
        legacy = message.get("function_call")
        made += [legacy] if isinstance(legacy, dict) else []
        rounds += bool(made)
        for function in made:
            try:
                arguments = json.loads(str(function.get("arguments") or "{}"))
            except ValueError:
                arguments = None
            if isinstance(arguments, dict):
                calls.setdefault(str(function.get("name", "")), []).append(arguments)
    return rounds, calls


def _is_call(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("function"), dict)


def _prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a request as sent: its messages' text (and a few tokens per message
    for the chat template's markers), and its tools. In text mode the functions are part of the
    system prompt's text and there are no tools, so they are counted once."""
    messages = body.get("messages") or []
    text = " ".join(message_text(m.get("content")) for m in messages if isinstance(m, dict))
    tools = body.get("tools")
    return estimate_tokens(text) + 3 * len(messages) + (estimate_tokens(canonical_json(tools)) if tools else 0)


def parse_conversation(body: dict[str, Any]) -> Conversation:
    """Validate `messages` and pull out the user's words, trailing tool results and tool use."""
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
    call_arguments: dict[str, Any] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if _is_call(call):
                call_names[str(call.get("id"))] = str(call["function"].get("name", ""))
                call_arguments[str(call.get("id"))] = call["function"].get("arguments")
    trailing: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message["role"] not in RESULT_ROLES:
            break
        trailing.insert(0, message)
    rounds, calls = _earlier_calls(messages)
    errors = [m for m in trailing if is_error_result(m.get("content"))]
    failed = [call_names.get(str(m.get("tool_call_id")), m.get("name") or "") for m in errors]
    refused = {value for m in errors
               for value in refused_values(call_arguments.get(str(m.get("tool_call_id"))), message_text(m.get("content")))}
    history = ToolHistory(
        failed=next((name for name in failed if name), None),
        refused=frozenset(refused),
        rounds=rounds,
        results_seen=any(m["role"] in RESULT_ROLES for m in messages),
        trailing_results=bool(trailing),
        asked_before=any(m["role"] == "assistant" and not m.get("tool_calls") and m.get("content") for m in messages),
        values=result_values(messages),
        calls=calls,
    )
    said = [message_text(m.get("content")) for m in reversed(users)]
    return Conversation(
        messages, user_text, content_words(user_text), said, trailing, call_names, history
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


def _seed(body: dict[str, Any]) -> int:
    seed = body.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _json_answer(
    schema: dict[str, Any] | None,
    text: str,
    context: list[str],
    rng: random.Random,
    settings: SimulatorSettings,
    conversation: Conversation,
    request_hash: str,
    seed: int = 0,
    index: int = 0,
) -> str:
    if schema is None:
        value: Any = {"answer": text, "keywords": [w.lower() for w in context[:5]]}
    else:
        # A model that follows the request fills in the fields the schema documents (an API's
        # response has all of them), not an arbitrary half of the optional ones.
        optional = 1.0 if obeys(settings, request_hash, "fill", index) else OPTIONAL_PROBABILITY

        def instance(branch: dict[str, Any]) -> Any:
            return instance_for(branch, rng, context, true_rate=settings.boolean_true_rate, optional_rate=optional)

        value = api_answer(schema, conversation.messages, instance)
        if value is None:
            value = instance(schema)
        value = read_choices(value, schema, conversation.messages)
        value = answer_question(value, schema, conversation.messages, rng, context)
        value = write_for_mode(value, writing_prompt(conversation.said), settings, request_hash)
        # Choice i of a request is sample i after the request's own: the same verdict as the
        # request with seed + i, so votes asked as n choices decide as votes asked one by one.
        value = settle(value, schema, conversation.messages, settings, seed + index)
    return json.dumps(value, ensure_ascii=False)


def _tool_call_message(
    index: int,
    calls: list[tuple[FunctionSpec, dict[str, Any]]],
    all_names: list[str],
    context: list[str],
    faults: fault_lib.ContentFaults,
    request_hash: str,
) -> tuple[dict[str, Any], str]:
    """The assistant message holding `calls`; content faults damage the first call only."""
    wire: list[dict[str, Any]] = []
    produced = ""
    for position, (spec, arguments) in enumerate(calls):
        name = spec.name
        if position == 0:
            name = _damage(index, spec, arguments, all_names, context, faults, request_hash)
        text = json.dumps(arguments, ensure_ascii=False)
        if position == 0 and faults.malformed_json:
            shape = fault_lib.fault_rng(request_hash, "malformed", index)
            text = fault_lib.malform_json(text, shape)
        salts: tuple[object, ...] = ("call", index) if position == 0 else ("call", index, position)
        wire.append(
            {
                "id": "call_" + sub_hash(request_hash, *salts)[:24],
                "type": "function",
                "function": {"name": name, "arguments": text},
            }
        )
        produced += name + text
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": wire}
    return message, produced


def _damage(
    index: int,
    spec: FunctionSpec,
    arguments: dict[str, Any],
    all_names: list[str],
    context: list[str],
    faults: fault_lib.ContentFaults,
    request_hash: str,
) -> str:
    """Apply this choice's name and argument faults (arguments in place); the name to send."""
    name = spec.name
    if faults.hallucinated_function:
        shape = fault_lib.fault_rng(request_hash, "hallucinated", index)
        name = fault_lib.hallucinated_name(name, all_names, context, shape)
    if faults.missing_required:
        fault_lib.drop_required(
            arguments, spec.parameters, fault_lib.fault_rng(request_hash, "missing", index)
        )
    if faults.wrong_type:
        fault_lib.wrong_type(
            arguments, spec.parameters, fault_lib.fault_rng(request_hash, "wrong_type", index)
        )
    return name


def _clarifying_question(
    callable_: list[FunctionSpec], conversation: Conversation, request_hash: str, index: int
) -> str | None:
    """The clarifying question for this choice, or None when the function needs nothing.

    The function and its arguments are drawn exactly as the call would draw them, so the
    question is about the function that would have been called.
    """
    rng = derive_rng(request_hash, "choice", index)
    context = conversation.context
    spec = callable_[0] if len(callable_) == 1 else choose_function(callable_, context, rng)
    arguments = instance_for(spec.parameters, rng, context)
    arguments = arguments if isinstance(arguments, dict) else {}
    return clarify_question(
        spec, arguments, conversation.user_text, derive_rng(request_hash, "clarify", index)
    )


def _text_answer(
    turn: Turn,
    question: str | None,
    conversation: Conversation,
    callable_: list[FunctionSpec],
    request_hash: str,
    index: int,
    rng: random.Random,
) -> tuple[str, list[str]]:
    """(the text of a turn without calls, the words a JSON answer may reuse)."""
    if question is not None:
        return question, conversation.context
    if turn is Turn.DECLINE:
        decline_rng = derive_rng(request_hash, "decline", index)
        return decline_answer(callable_, conversation.user_text, decline_rng), conversation.context
    if conversation.tool_results:
        context = conversation.context + [
            w
            for m in conversation.tool_results
            for w in content_words(message_text(m.get("content")))
        ]
        return tool_result_answer(conversation, rng), context
    return topical_answer(conversation.user_text, rng), conversation.context


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
    if count > 1 and settings.choices == "refused":
        raise SimulatorError("'n' above 1 is not supported by this model.", param="n", code="unsupported_parameter")
    count = 1 if settings.choices == "first" else count
    refused = profiles.refused_parameter(body, settings)
    if refused is not None:
        raise refused
    text_format = declared_format(body)
    sent = body  # what the prompt tokens count: a text-mode prompt as written, not as read back
    native = structured_body(body, text_format) if text_format else None
    if native is not None:
        body = native
    else:
        text_format = None
    conversation = parse_conversation(body)
    functions = parse_functions(body)
    # A function that asks the user for what is missing is no API: a model calls it only to
    # ask (step 3's question), never to serve the request.
    asker = next((spec for spec in callable_functions(body, functions) if asks_user(spec)), None)
    callable_ = [spec for spec in callable_functions(body, functions) if not asks_user(spec)]
    forced = call_is_forced(body)
    # A request the user says needs a mode (see .instructions) is acted on when obeyed.
    intent = requested_mode(conversation.user_text) if settings.obedience else None
    relevant = not settings.decline_when_irrelevant or is_relevant(
        callable_, conversation.context, conversation.user_text
    )
    wants_json, schema = _json_format(body)
    json_in_prompt = False
    if schema is None:
        # Without a schema in response_format, a model follows the one written in the prompt.
        written = schema_in_prompt(conversation.messages)
        if written is not None:
            json_in_prompt = not wants_json
            wants_json, schema = True, written

    choices: list[dict[str, Any]] = []
    completion_tokens = 0
    for index in range(count):
        rng = derive_rng(request_hash, "choice", index)
        faults = fault_lib.content_faults(settings, request_hash, index)
        finish = "stop"
        turn = decide_turn(
            settings,
            request_hash,
            index,
            can_call=bool(callable_),
            forced=forced,
            relevant=relevant,
            said_something=bool(conversation.context),
            history=conversation.history,
            intent=intent,
            obeyed=obeys(settings, request_hash, "act", index),
        )
        question = (
            _clarifying_question(callable_, conversation, request_hash, index)
            if turn is Turn.CLARIFY
            else None
        )
        if turn is Turn.CLARIFY and question is None:
            turn = Turn.CALL
        if turn is Turn.CLARIFY and asker is not None and question is not None:
            message, produced = ask_with(asker, question, index, request_hash)
            finish = "tool_calls"
        elif turn is Turn.CALL:
            parallel = wants_parallel(body, settings, request_hash, index)
            follows = obeys(settings, request_hash, "act", index)
            if intent is not None and follows:
                parallel = intent == "parallel" and body.get("parallel_tool_calls") is not False
            calls = plan_calls(
                callable_,
                conversation.context,
                conversation.history,
                rng,
                derive_rng(request_hash, "parallel", index) if parallel else None,
                conversation.said if follows else None,
            )
            message, produced = _tool_call_message(
                index,
                calls,
                [f.name for f in functions],
                conversation.context,
                faults,
                request_hash,
            )
            finish = "tool_calls"
        else:
            text, context = _text_answer(
                turn, question, conversation, callable_, request_hash, index, rng
            )
            if wants_json:
                text = _json_answer(schema, text, context, rng, settings, conversation, request_hash,
                                    _seed(body), index)
                if faults.malformed_json:
                    text = fault_lib.malform_json(
                        text, fault_lib.fault_rng(request_hash, "malformed", index)
                    )
            message = {"role": "assistant", "content": text, "refusal": None}
            produced = text
        if text_format is not None:
            message = as_text(message, text_format, request_hash, system_text(body))
            finish = "stop" if finish == "tool_calls" else finish
        # The provider's shape wraps the whole answer: a reasoning model thinks before it writes
        # its calls as text, not inside them.
        message, finish, produced = profiles.shape(
            message, finish, produced, body, settings, request_hash, index, json_in_prompt=json_in_prompt
        )
        completion_tokens += estimate_tokens(produced)
        choices.append(
            {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        )

    prompt_tokens = _prompt_tokens(sent)
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
