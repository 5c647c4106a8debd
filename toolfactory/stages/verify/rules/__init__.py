"""Deterministic rules of the verify stage (ToolACE §3.1 rule layer and Table 6, ToolAlpaca §4.1
and ToolLLM filters), one module per family:

* :mod:`.definition`: API definition clarity (``tool_*``);
* :mod:`.function_call`: function-call executability (``call_*``);
* :mod:`.dialogue`: dialogue correctness (``dialogue_*``);
* :mod:`.consistency`: data sample consistency (``sample_*``);
* :mod:`.filters`: dataset filters (``filter_*``);
* :mod:`.execution`: the replay of calls on executable sources (``exec_*``), judged by the
  execution layer (:mod:`toolfactory.stages.verify.execution`), not by :func:`check`;
* :mod:`.argument_grounding`: argument values traced to the conversation (``arg_value_ungrounded``);
* :mod:`.control_tokens`: action syntax in a final answer (``answer_control_token``);
* :mod:`.contradiction`: an assistant that contradicts its own calls (``assistant_contradicts_calls``).

Each rule has a stable code and a severity ("error" rejects, "warning" is recorded only) and
returns one failed :class:`~toolfactory.models.Verdict` per problem, with a message and the path
of the offending part (``messages[3].tool_calls[0].arguments/days``). :func:`check` returns every
failed verdict of every enabled rule. The registry lives in :mod:`.registry`.
"""

from __future__ import annotations

from toolfactory.stages.verify.rules.registry import RULES, Rule, Sample, check, errors, record_rules, rule
# Importing the family modules registers their rules, in this order (the order of verdicts).
from toolfactory.stages.verify.rules import definition  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import function_call  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import dialogue  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import consistency  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import filters  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import execution  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import argument_grounding  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import control_tokens  # noqa: E402,F401  isort: skip
from toolfactory.stages.verify.rules import contradiction  # noqa: E402,F401  isort: skip

__all__ = ["RULES", "Rule", "Sample", "check", "errors", "record_rules", "rule"]
