"""The words of the product's prompts that the offline simulator recognises them by.

The simulator (toolfactory/simulator) answers like a model that read the prompt: it writes
requests in the mode a request-writing prompt asks for, states the values a prompt asks it to
state, answers a judge's questions, writes calls in the format a system prompt declares. It finds
those prompts by their wording, so the wording it relies on is declared here, once, next to the
prompts, and the simulator imports it. :func:`written_in` names the prompt text each marker is
taken from, and tests/simulator/test_prompt_markers.py checks that each still occurs there: a
prompt reworded without its marker fails that test, instead of an end-to-end run passing or
failing because the test double no longer agrees with the prompts.

The constants are plain strings (importing this module loads nothing else); the prompts are
imported only by :func:`written_in`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

# --- request-writing prompts: the mode each asks for (ToolACE's MODE_GUIDES and their notes) ---

MODE_SINGLE = "exactly one call"
MODE_MULTIPLE = "exactly one of the functions"
MODE_PARALLEL = "do not depend on each other"
MODE_PARALLEL_AT_ONCE = "made at once"
MODE_DEPENDENT = "comes from an earlier call"
MODE_NON_TOOL = "none of the offered functions can"
MODE_NON_TOOL_SUBJECT = "not served by the functions"
MODE_MISSING = "has to ask for it"
MODE_MISSING_VALUE = "leaves out exactly one value"

# --- request-writing prompts: what the requests must state ---

ASKS_CONCRETE_VALUES = "concrete values"  # ToolACE's and ToolAlpaca's user prompts
ASKS_EVERY_VALUE = "every value a call needs"  # ToolLLM's query prompt
ASKS_FOR_CALLS = "everything its calls need"  # blueprints: requests written with their calls
FACTS_HEADING = "What exists in a fresh environment"  # the explored environment's section
LINK_GIVES = "'s result gives the"  # "a's result gives the x that b needs" (data_flow.Link)
LINK_NEEDS = " needs"

# --- the judges' prompts and their transcript ---

JUDGE_QUESTIONS = "Questions:"  # before the questions of a judge's message
JUDGE_QUESTION = "Question:"  # before the one question of an aspect's judge
TRANSCRIPT_CALLS = "assistant calls"  # the speaker of a transcript line with the assistant's calls

# --- the assistant's system prompt in text tool calling ---

CALL_FORMAT_DECLARATION = "Function call format: "
REACT_FINAL_ANSWER = "Final Answer"


def _toolace_modes() -> str:
    from toolfactory.stages.tasks import toolace

    return " ".join(toolace.MODE_GUIDES.values())


def _toolace_notes() -> str:
    from toolfactory.stages.tasks import toolace

    return inspect.getsource(toolace.toolace_tasks)  # the notes are written where the mode is drawn


def _user_prompts() -> str:
    from toolfactory.stages.tasks import toolace, toolalpaca

    return toolace.PROMPT + toolalpaca.USER_AGENT_PROMPT


def _toolllm_prompt() -> str:
    from toolfactory.stages.tasks import toolllm

    return str(toolllm.PROMPT)


def _blueprint_prompt() -> str:
    from toolfactory.stages.tasks import blueprints

    return str(blueprints.DESIGNER_PROMPT)


def _facts_section() -> str:
    from toolfactory.stages.tasks import exploration

    return str(exploration.SECTION_HEADING)


def _link_sentence() -> str:
    from toolfactory.models import Function
    from toolfactory.stages.tasks.data_flow import links

    earlier = Function(name="list_stations", description="List the stations.", parameters={"type": "object", "properties": {}},
                       returns={"type": "object", "properties": {"station_id": {"type": "string"}}})
    later = Function(name="get_station", description="Station id as returned by list_stations.",
                     parameters={"type": "object", "properties": {"station_id": {"type": "string"}}, "required": ["station_id"]})
    return " ".join(link.sentence() for link in links([earlier, later]))


def _judge_prompts() -> str:
    from toolfactory.stages.verify import judges

    return inspect.getsource(judges)  # the questions and the transcript are written by its functions


def _call_format_prompt() -> str:
    from toolfactory.render import dialogue

    return inspect.getsource(dialogue)


def _react_prompt() -> str:
    from toolfactory.stages.dialogues import react

    return inspect.getsource(react)


# Each marker and the product text it is taken from (compared without case, as the simulator does).
WRITTEN_IN: dict[str, Callable[[], str]] = {
    MODE_SINGLE: _toolace_modes,
    MODE_MULTIPLE: _toolace_modes,
    MODE_PARALLEL: _toolace_modes,
    MODE_PARALLEL_AT_ONCE: _toolace_modes,
    MODE_DEPENDENT: _toolace_modes,
    MODE_NON_TOOL: _toolace_modes,
    MODE_NON_TOOL_SUBJECT: _toolace_notes,
    MODE_MISSING: _toolace_modes,
    MODE_MISSING_VALUE: _toolace_modes,
    ASKS_CONCRETE_VALUES: _user_prompts,
    ASKS_EVERY_VALUE: _toolllm_prompt,
    ASKS_FOR_CALLS: _blueprint_prompt,
    FACTS_HEADING: _facts_section,
    LINK_GIVES: _link_sentence,
    LINK_NEEDS: _link_sentence,
    JUDGE_QUESTIONS: _judge_prompts,
    JUDGE_QUESTION: _judge_prompts,
    TRANSCRIPT_CALLS: _judge_prompts,
    CALL_FORMAT_DECLARATION: _call_format_prompt,
    REACT_FINAL_ANSWER: _react_prompt,
}


def written_in(marker: str) -> str:
    """The product text `marker` is taken from."""
    return WRITTEN_IN[marker]()
