"""What curation reads of a dialogue: its query, the functions it uses, and the one text that
describes a function to an embedding model.

Query complexity (ToolACE §4.2.1) compares a query with "the tools it uses"; the diversity
ablation (§5.3.3) clusters APIs "by their names and descriptions" and assigns records to the
clusters of "their associated APIs". Both read the same definitions from here, so that the two
metrics agree on which functions a record stands for and embed each function's text only once.
"""

from __future__ import annotations

from typing import Iterable

from toolfactory.models import Dialogue, Function, stable_id

# ToolLLM's terminal function (toolfactory.stages.dialogues.search.FINISH), spelled out here so
# that this library does not import the stages, which will import it (the curate stage).
FINISH = "Finish"


def query(dialogue: Dialogue) -> str:
    """The first user message: the request the dialogue answers (ToolACE's "user query")."""
    return next((m.content or "" for m in dialogue.messages if m.role == "user"), "")


def function_text(function: Function) -> str:
    """``"name: description"``, what the embedding model sees of a function (the name alone when
    there is no description: the name is all a model would know of it)."""
    description = function.description.strip()
    return f"{function.name}: {description}" if description else function.name


def function_key(function: Function) -> str:
    """A readable key that tells apart functions of one name with different descriptions (two
    tools may both offer a ``search``); equal texts get equal keys, as they get equal embeddings."""
    return f"{function.name}@{stable_id('function', function.name, function.description.strip())[:8]}"


def called_functions(dialogue: Dialogue) -> list[Function]:
    """The offered functions the dialogue calls, in order of first call.

    ToolLLM's ``Finish`` is left out: it ends every ToolLLM search whatever the query, so it
    would make all those records look alike. A call of a function that is not offered (the
    verifier rejects those) has no description and is left out too."""
    offered = {fn.name: fn for fn in dialogue.tools}
    names = dict.fromkeys(call.name for m in dialogue.messages for call in m.tool_calls or [])
    return [offered[name] for name in names if name in offered and name != FINISH]


def used_functions(dialogue: Dialogue) -> list[Function]:
    """The functions a record stands for: those it calls, or, when it calls none (a non-tool or a
    clarifying dialogue), those it offers; without ``Finish`` in both cases."""
    return called_functions(dialogue) or [fn for fn in dialogue.tools if fn.name != FINISH]


def offered_functions(dialogues: Iterable[Dialogue]) -> list[Function]:
    """Every distinct function offered in `dialogues` (by :func:`function_key`), sorted by key so
    that the result does not depend on the order of the records."""
    distinct = {function_key(fn): fn for d in dialogues for fn in d.tools if fn.name != FINISH}
    return [distinct[key] for key in sorted(distinct)]
