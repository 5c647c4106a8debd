"""ToolLLM's terminal function ``Finish``, as ToolBench's released answers define and answer it.

Readers of released ToolBench and ToolEval data, the exports that write ToolLLM paths and the
verifier's labelled corpus all offer or answer the same function, so it is defined once here.
"""

from __future__ import annotations

from toolfactory.models import Function

# ToolLLM's terminal function and the observation its environment returns (as recorded in the
# DFSDT trees of ToolBench's released answers).
FINISH_FUNCTION = Function(
    name="Finish",
    description=(
        "If you think you get the result which can answer the task, call this function to give the final answer. "
        "Or, if you think you can't handle the task from this status, call this function to restart."
    ),
    parameters={
        "type": "object",
        "properties": {
            "return_type": {"type": "string", "enum": ["give_answer", "give_up_and_restart"]},
            "final_answer": {"type": "string", "description": "The final answer you want to give the user."},
        },
        "required": ["return_type"],
    },
)
FINISH_ANSWERED = '{"response":"successfully giving the final answer."}'
FINISH_GAVE_UP = '{"response":"chose to give up and restart"}'
