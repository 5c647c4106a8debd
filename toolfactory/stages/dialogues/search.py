"""Solution-path search for one instruction: ReAct and DFSDT (ToolLLM §2.3, appendix A.4, A.8).

The assistant answers with native function calls. Besides the task's functions it is offered
ToolLLM's `Finish` function (A.8): ``give_answer`` with a ``final_answer`` ends the search,
``give_up_and_restart`` abandons the current branch. Each node of the decision tree is one
assistant reply: tool calls (answered by the injected executor, or by the error a real API
would give when the call is invalid), a plain-text thought, or a `Finish`.

DFSDT is the pre-order depth-first search of A.4: a node's children are generated one at a
time and the first one is followed at once, without ranking siblings (ToolLLM found the first
generated child is usually the best, and ranking costs O(n log n) calls). A sibling is generated
only after the subtree below the previous child failed (the model gave up, or every path below it
reached `max_depth`), and its request carries A.8's diversity prompt listing the earlier children
and a new `sample` index, so the request (and its cache entry) differs. ReAct is the same search
with one child per node, the "degenerate DFSDT" of A.4.

What differs from ToolBench's code, and why:

* a `Finish` call that is itself invalid (bad JSON, missing ``return_type``, ``give_answer``
  without a ``final_answer``) fails its branch like a give-up instead of getting an error
  observation, so `Finish` never appears as a tool call in a kept path;
* a plain-text reply is a thought step (as in ToolBench) and counts towards `max_depth`, so a
  model that never acts cannot loop forever;
* calls sent next to a terminal `Finish` in the same reply are not executed (the answer cannot
  depend on their results); they are listed in the finish record;
* with a `rejects` check (the dialogues stage passes the verify stage's rule layer under the
  recipe's policy, ``dialogues.reject_early``), a reply whose calls make every path through it
  one the verify stage rejects (an unknown function, arguments that are no JSON or break the
  schema) fails its branch like a give-up, before its calls are executed: ToolBench answers
  them with an error and goes on below, spending requests on paths that can never be kept,
  where the search can still try the node's next child. Likewise an answer whose whole path the
  rule layer rejects (``rejects_answer``: no call at all, say) fails its branch: the judges are
  never asked about a path the rules reject, and the search tries the next child;
* requests that cannot lead to an answer are not sent: the calls of a reply at `max_depth` are
  not executed (no path goes on below that node, so their results could only be shown to a
  later sibling), and a reply's calls are not executed when the budget left after them would
  not allow the one more assistant request that could give an answer (the search ends there,
  as it would have on the next request).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Literal, Protocol, Sequence

from toolfactory.errors import ToolfactoryError
from toolfactory.models import Function, Message, Tool, ToolCall
from toolfactory.stages.dialogues.agents import call_error
from toolfactory.stages.dialogues.assistant import wire

FINISH = "Finish"
GIVE_ANSWER = "give_answer"
GIVE_UP = "give_up_and_restart"

# A.8 system_prompt, verbatim.
SYSTEM_PROMPT = """\
You are Tool-GPT, capable of utilizing numerous tools and functions to complete the given task.
1.First, I will provide you with the task description, and your task will commence.
2.At each step, you need to analyze the current status and determine the next course of action by executing a function call.
3.Following the call, you will receive the result, transitioning you to a new state. Subsequently, you will analyze your current status, make decisions about the next steps, and repeat this process.
4.After several iterations of thought and function calls, you will ultimately complete the task and provide your final answer.
Remember:
1.The state changes are irreversible, and you cannot return to a previous state.
2.Keep your thoughts concise, limiting them to a maximum of five sentences.
3.You can make multiple attempts. If you plan to try different conditions continuously, perform one condition per try.
4.If you believe you have gathered enough information, call the function "Finish: give_answer" to provide your answer for the task.
5.If you feel unable to handle the task from this step, call the function "Finish: give_up_and_restart".
Let's Begin!
Task description: {task_description}"""

# A.8 diversity_user_prompt, verbatim (including the paper's "trails").
DIVERSITY_PROMPT = """\
This is not the first time you try this task, all previous trails failed.
Before you generate your thought for this state, I will first show you your previous actions for this state, and then you must generate actions that is different from all of them. Here are some previous actions candidates:
{previous_candidate}
Remember you are now in the intermediate state of a trail, you will first analyze the now state and previous action candidates, then make actions that is different from all the previous."""

# A.8 Finish_function_description.
FINISH_FUNCTION = Function(
    name=FINISH,
    description=(
        "If you believe that you have obtained a result that can answer the task, please call this "
        "function to provide the final answer. Alternatively, if you recognize that you are unable to "
        "proceed with the task in the current state, call this function to restart. Remember: you must "
        "ALWAYS call this function at the end of your attempt, and the only part that will be shown to "
        "the user is the final answer, so it should contain sufficient information."
    ),
    parameters={
        "type": "object",
        "properties": {
            "return_type": {"type": "string", "enum": [GIVE_ANSWER, GIVE_UP]},
            "final_answer": {
                "type": "string",
                "description": 'The final answer you want to give the user. You should have this field if "return_type"=="give_answer"',
            },
        },
        "required": ["return_type"],
    },
)

# What ToolBench's environment answers to a give-up; shown to later siblings as its output.
GIVE_UP_OUTPUT = '{"response": "chose to give up and restart"}'

# What a later sibling's diversity prompt shows as the output of a call that failed its branch.
REJECTED_OUTPUT = '{"status_code": 400, "error": "invalid call: this branch was abandoned"}'

# ... and of an answer whose path the rules reject.
REJECTED_ANSWER_OUTPUT = '{"status_code": 400, "error": "answer rejected: the path breaks the rules a kept path must pass"}'

# ... and of a call at `max_depth`, which is not executed: no path goes on below it.
DEPTH_CUT_OUTPUT = '{"response": "not executed: the path reached its maximum length"}'

Method = Literal["dfsdt", "react"]
FinishType = Literal["give_answer", "give_up", "limit"]
Limit = Literal["max_depth", "max_calls"]
NodeKind = Literal["call", "thought", "give_answer", "give_up", "invalid_finish", "rejected_call", "rejected_answer",
                   "depth_cut"]
# Whether the messages of a path (the last one an assistant reply whose calls are not yet
# answered) already fail the checks a kept path must pass.
Rejects = Callable[[list[Message]], bool]
WireMessage = dict[str, Any]


FAILED = ("give_up", "invalid_finish", "rejected_call", "rejected_answer", "depth_cut")  # kinds that end their branch without an answer


class Chat(Protocol):
    """One assistant reply (an OpenAI message dict) to `messages` with `tools` offered.

    `sample` distinguishes re-expansions of one node; wire it to the gateway's ``sample``."""

    def __call__(self, messages: list[WireMessage], *, tools: list[dict[str, Any]], sample: int) -> Awaitable[WireMessage]: ...


# The tool executor: the response text the assistant sees for a valid call (one LLM call).
Execute = Callable[[Function, ToolCall], Awaitable[str]]
# A reply's calls as they are to run and to be kept (the dialogues stage coerces near-miss
# argument types of executable tools: toolfactory.executable.coercion).
WellTyped = Callable[[list[ToolCall]], list[ToolCall]]


@dataclass(frozen=True)
class SearchNode:
    """One expanded node, for the record's metadata: what the reply did and where it sits."""

    id: int
    parent: int  # 0 is the task itself (the root state)
    depth: int
    kind: NodeKind
    calls: tuple[str, ...]  # names of the functions called (Finish included)
    sample: int  # the re-expansion index sent to `chat`


def joined_thoughts(messages: list[Message]) -> list[Message]:
    """`messages` with each assistant text turn without calls that is directly followed by another
    assistant turn merged into it: into its content when it calls (the thought of that call),
    into its `reasoning` when it is the final answer."""
    out: list[Message] = []
    for message in messages:
        previous = out[-1] if out else None
        if (message.role == "assistant" and previous is not None and previous.role == "assistant"
                and not previous.tool_calls and not previous.masked):
            thought = "\n".join(t for t in (previous.reasoning, previous.content) if t)
            if message.tool_calls:
                merged = {"content": "\n".join(t for t in (thought, message.content) if t) or None}
            else:
                merged = {"reasoning": "\n".join(t for t in (thought, message.reasoning) if t) or None}
            out[-1] = message.model_copy(update=merged)
            continue
        out.append(message)
    return out


@dataclass(frozen=True)
class Alternative:
    """A reply the search tried and abandoned at a state of the kept path: the rejected side of a
    step-level preference pair (chosen: the kept path's reply at that state). DFSDT's failed
    siblings; ToolLLM's paper keeps only the kept path, preference training on the decision tree
    (TP-LLaMA) pairs each kept step with the failed siblings before it.

    `at` is the number of kept messages before the state (the kept path's reply to it is
    ``messages[at]``); `kind` what ended the branch: a node kind of :data:`FAILED`, or ``call``
    when the reply's calls ran but every path below it failed."""

    at: int
    kind: str
    message: Message

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "kind": self.kind, "message": self.message.model_dump(exclude_none=True)}


@dataclass(frozen=True)
class SearchResult:
    """The kept path and how the search went.

    `messages` is canonical: the task messages, then for each step the assistant reply and its
    tool results; with ``give_answer`` it ends with the final answer as plain assistant content
    (the reply's own thought, if any, in `reasoning`). A plain-text thought step joins the
    assistant message that follows it (ToolLLM stores a thought and its call as one message; a
    model cannot answer in text and then call a tool without a new user turn). `Finish` is never a tool call in it; the
    call that ended the kept path is `finish`. Without an answer the path is the last one
    explored.

    `finish_type` is ``give_answer`` when a path ended with an answer; ``give_up`` when every
    branch ended with the model giving up (or with an invalid `Finish`), for ReAct its one
    chain; ``limit`` otherwise, and then `limit` names the limit that stopped the search:
    ``max_calls`` when the budget ran out, ``max_depth`` when the tree was exhausted and at least
    one path was cut at `max_depth` (a deeper search might have answered).
    """

    messages: list[Message]
    finish_type: FinishType
    limit: Limit | None
    method: Method
    tree_size: int  # nodes expanded: assistant replies in the tree (a reply cut short by max_calls is not)
    llm_calls: int  # assistant and executor requests
    path_depth: int  # assistant steps on the kept path
    backtracks: int  # re-expansions of a node after its previous child's subtree failed
    finish: dict[str, Any] | None
    tree: tuple[SearchNode, ...]
    alternatives: tuple[Alternative, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """A JSON-ready summary to store with the record."""
        return {
            "method": self.method,
            "finish_type": self.finish_type,
            "limit": self.limit,
            "tree_size": self.tree_size,
            "llm_calls": self.llm_calls,
            "path_depth": self.path_depth,
            "backtracks": self.backtracks,
            "finish": self.finish,
            "tree": [asdict(node) for node in self.tree],
            "alternatives": [alternative.to_dict() for alternative in self.alternatives],
        }


def kept_messages(end: _Node) -> list[Message]:
    """The canonical messages of the path down to `end`, without the nodes that failed."""
    return joined_thoughts([m for node in end.path() if node.kind not in FAILED for m in node.messages])


def opening_messages(instruction: str, tools: Sequence[Tool]) -> list[Message]:
    """ToolLLM's opening: A.8's system prompt describing the tools, then the instruction."""
    lines = ["You have access to the following tools:"]
    lines += [f"{i}.{tool.name}: {tool.description}".rstrip(": ") for i, tool in enumerate(tools, 1)]
    return [
        Message(role="system", content=SYSTEM_PROMPT.format(task_description="\n".join(lines))),
        Message(role="user", content=instruction),
    ]


async def solve(
    task_messages: list[Message],
    functions: Sequence[Function],
    *,
    chat: Chat,
    execute: Execute,
    method: Method = "dfsdt",
    max_depth: int = 12,
    max_children: int = 2,
    max_calls: int = 120,
    rejects: Rejects | None = None,
    rejects_answer: Rejects | None = None,
    well_typed: WellTyped | None = None,
) -> SearchResult:
    """Search a solution path for the task that `task_messages` opens (see :func:`opening_messages`).

    `max_depth` counts assistant replies on a path, `max_children` the children of one node, and
    `max_calls` the assistant and executor requests of the whole search. The width of 2 is
    ToolBench's DFSDT (`DFS_woFilter_w2`); ToolBench's code caps a chain at 12 tree nodes and an
    instruction at 60 assistant queries, and since executor calls count here too the default
    budget is twice that. ``method="react"`` ignores `max_children` (one child per node).
    `rejects` sees a path ending with a reply whose calls are not answered yet; `rejects_answer`
    a finished path as it would be kept (ending with the final answer). `well_typed` turns each
    reply's calls into those that are checked, run and kept.
    """
    if method not in ("dfsdt", "react"):
        raise ValueError(f"method must be 'dfsdt' or 'react', got {method!r}")
    for key, value in (("max_depth", max_depth), ("max_children", max_children), ("max_calls", max_calls)):
        if value < 1:
            raise ValueError(f"{key} must be at least 1, got {value}")
    if any(fn.name == FINISH for fn in functions):
        raise ValueError(f"a task function may not be named {FINISH!r}: the search offers its own")
    width = 1 if method == "react" else max_children
    search = _Search(list(task_messages), functions, chat, execute, max_depth, width, max_calls, rejects, rejects_answer,
                     well_typed)
    return await search.run(method)


class _OutOfCalls(ToolfactoryError):
    """The next request would exceed `max_calls`."""


@dataclass(eq=False)
class _Node:
    id: int
    parent: _Node | None
    depth: int
    kind: NodeKind | Literal["root"]
    messages: list[Message]  # what this node adds to a kept path
    candidate: list[dict[str, Any]]  # how the diversity prompt shows this action to its siblings
    sample: int = 0
    calls: tuple[str, ...] = ()
    finish: dict[str, Any] | None = None
    children: list[_Node] = field(default_factory=list)
    reply: Message | None = None  # the assistant reply as sent, Finish call included

    def path(self) -> list[_Node]:
        """The nodes from the root down to this one."""
        nodes: list[_Node] = [self]
        while nodes[-1].parent is not None:
            nodes.append(nodes[-1].parent)
        return nodes[::-1]


class _Search:
    def __init__(
        self, opening: list[Message], functions: Sequence[Function], chat: Chat, execute: Execute,
        max_depth: int, max_children: int, max_calls: int, rejects: Rejects | None = None,
        rejects_answer: Rejects | None = None, well_typed: WellTyped | None = None,
    ) -> None:
        self.rejects, self.rejects_answer, self.well_typed = rejects, rejects_answer, well_typed
        self.by_name = {fn.name: fn for fn in functions}
        self.tools = [fn.openai_tool() for fn in functions] + [FINISH_FUNCTION.openai_tool()]
        self.chat, self.execute = chat, execute
        self.max_depth, self.max_children, self.max_calls = max_depth, max_children, max_calls
        self.root = _Node(0, None, 0, "root", opening, [])
        self.nodes: list[_Node] = []
        self.calls = self.backtracks = self.depth_cutoffs = 0
        self.last: _Node = self.root  # end of the most recently explored path

    async def run(self, method: Method) -> SearchResult:
        limit: Limit | None = None
        try:
            answer = await self.dfs(self.root)
        except _OutOfCalls:
            answer, limit = None, "max_calls"
        if answer is not None:
            finish_type: FinishType = "give_answer"
        elif limit is None and self.depth_cutoffs:
            finish_type, limit = "limit", "max_depth"
        else:
            finish_type = "limit" if limit else "give_up"
        end = answer or self.last
        path = end.path()
        kept = [n for n in path if n.kind not in FAILED]
        alternatives = self.alternatives(kept) if answer is not None else ()
        return SearchResult(
            messages=kept_messages(end),
            finish_type=finish_type,
            limit=limit,
            method=method,
            tree_size=len(self.nodes),
            llm_calls=self.calls,
            path_depth=len(kept) - 1,
            backtracks=self.backtracks,
            finish=end.finish if limit is None else None,
            tree=tuple(
                SearchNode(n.id, n.parent.id if n.parent else 0, n.depth, n.kind, n.calls, n.sample)  # type: ignore[arg-type]
                for n in self.nodes
            ),
            alternatives=alternatives,
        )

    def alternatives(self, kept: list[_Node]) -> tuple[Alternative, ...]:
        """The abandoned replies at each state of the kept path that ends with an answer. A thought
        joins the reply after it (:func:`joined_thoughts`), so a reply tried after a thought is
        kept joined with that thought, at the state before it; a sibling that is itself a thought
        is no reply of its own and is left out."""
        out: list[Alternative] = []
        for i, (parent, child) in enumerate(zip(kept, kept[1:])):
            state = i
            while kept[state].kind == "thought":
                state -= 1
            thoughts = [m for node in kept[state + 1:i + 1] for m in node.messages]
            at = len(kept_messages(kept[state]))
            for sibling in parent.children:
                if sibling is child or sibling.reply is None or sibling.kind == "thought":
                    continue
                out.append(Alternative(at, sibling.kind, joined_thoughts([*thoughts, sibling.reply])[-1]))
        return tuple(out)

    async def dfs(self, node: _Node) -> _Node | None:
        """Pre-order DFS below `node`: the answering node, or None when every branch failed."""
        self.last = node
        if node.depth >= self.max_depth:
            self.depth_cutoffs += 1
            return None
        for index in range(self.max_children):
            if index:
                self.backtracks += 1
            child = await self.expand(node, index)
            if child.kind == "give_answer":
                return child
            if child.kind == "depth_cut":
                self.depth_cutoffs += 1
            if child.kind in FAILED:
                self.last = child
                continue
            found = await self.dfs(child)
            if found is not None:
                return found
        return None

    def spend(self) -> None:
        if self.calls >= self.max_calls:
            raise _OutOfCalls
        self.calls += 1

    async def expand(self, parent: _Node, index: int) -> _Node:
        """Generate `parent`'s next child: one assistant reply, and its tool results."""
        request = wire([m for node in parent.path() for m in node.messages])
        if index:
            shown = [c for child in parent.children for c in child.candidate]
            prompt = DIVERSITY_PROMPT.format(previous_candidate=json.dumps(shown, indent=2))
            request.append({"role": "user", "content": prompt})
        self.spend()
        reply = await self.chat(request, tools=self.tools, sample=index)
        node_id = len(self.nodes) + 1
        calls = [
            ToolCall(
                id=c.get("id") or f"call_{node_id}_{i}",
                name=c["function"]["name"],
                arguments=c["function"].get("arguments") or "",
            )
            for i, c in enumerate(reply.get("tool_calls") or [])
        ]
        if self.well_typed is not None and calls:
            calls = self.well_typed(calls)
        content = reply.get("content")
        child = _Node(node_id, parent, parent.depth + 1, "thought", [], [], index, tuple(c.name for c in calls),
                      reply=Message(role="assistant", content=content, tool_calls=calls or None))
        finish = next((c for c in calls if c.name == FINISH), None)
        if finish is not None:
            self.terminal(child, finish, content, [c for c in calls if c is not finish])
            if child.kind == "give_answer" and self.rejects_answer is not None and self.rejects_answer(kept_messages(child)):
                child.kind = "rejected_answer"
                child.candidate = [{**child.candidate[0], "function_output": REJECTED_ANSWER_OUTPUT}]
        elif calls and self.rejects is not None and self.rejects(
                [m for node in parent.path() for m in node.messages] + [Message(role="assistant", content=content, tool_calls=calls)]):
            child.kind = "rejected_call"
            child.candidate = [{"name": c.name, "arguments": c.arguments, "function_output": REJECTED_OUTPUT} for c in calls]
        elif calls and child.depth >= self.max_depth:
            # No path goes on below this node: its calls' results could never reach an answer.
            child.kind = "depth_cut"
            child.candidate = [{"name": c.name, "arguments": c.arguments, "function_output": DEPTH_CUT_OUTPUT} for c in calls]
        elif calls:
            # Executing the calls pays only if one more request (the answer) fits in the budget.
            executed = sum(call_error(self.by_name.get(c.name), c.name, c.arguments) is None for c in calls)
            if self.max_calls - self.calls < executed + 1:
                raise _OutOfCalls
            child.kind = "call"
            child.messages = [Message(role="assistant", content=content, tool_calls=calls)]
            for call in calls:
                output = await self.observe(call)
                child.messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=output))
                child.candidate.append({"name": call.name, "arguments": call.arguments, "function_output": output})
        else:
            child.messages = [Message(role="assistant", content=content)]
            child.candidate = [{"thought": content}]
        parent.children.append(child)
        self.nodes.append(child)
        return child

    def terminal(self, node: _Node, call: ToolCall, thought: str | None, others: list[ToolCall]) -> None:
        """Make `node` a terminal Finish node: an answer, a give-up, or an invalid Finish."""
        error = call_error(FINISH_FUNCTION, call.name, call.arguments)
        values = json.loads(call.arguments or "{}") if error is None else {}
        answer = values.get("final_answer")
        if error is None and values["return_type"] == GIVE_ANSWER and not (isinstance(answer, str) and answer.strip()):
            error = 'invalid arguments: "final_answer" is required when "return_type" is "give_answer"'
        node.finish = {
            "id": call.id, "arguments": call.arguments, "return_type": values.get("return_type"), "thought": thought
        }
        if others:
            node.finish["discarded_calls"] = [{"name": c.name, "arguments": c.arguments} for c in others]
        if error is not None:
            node.kind, node.finish["error"] = "invalid_finish", error
            output = json.dumps({"status_code": 400, "error": error})
        elif values["return_type"] == GIVE_UP:
            node.kind, output = "give_up", GIVE_UP_OUTPUT
        else:
            node.kind, output = "give_answer", ""
            node.messages = [Message(role="assistant", content=answer, reasoning=thought or None)]
        node.candidate = [{"name": FINISH, "arguments": call.arguments, "function_output": output}]

    async def observe(self, call: ToolCall) -> str:
        """The tool result for `call`: the executor's response, or the error of an invalid call."""
        function = self.by_name.get(call.name)
        error = call_error(function, call.name, call.arguments)
        if error is not None or function is None:
            return json.dumps({"status_code": 400, "error": error})
        self.spend()
        return await self.execute(function, call)
