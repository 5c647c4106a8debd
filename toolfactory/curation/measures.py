"""What curation needs to know of one accepted dialogue, computed where the dialogue is.

A :class:`Measure` is the compact row the fan-in decision (:mod:`.selection`) reads instead of the
dialogue: its MinHash signatures and exact hash (:mod:`.dedup`), its query complexity (ToolACE
eq. 1, :mod:`.complexity`), the functions it stands for and the texts of those it offers (for the
API clusters, :mod:`.diversity`), its mode (for steering) and the evaluation sets its user turns
overlap (:mod:`.contamination`). Measuring needs the dialogue and
the embeddings of its texts only, so it runs shard by shard, in parallel; a row is about 2 kB
where a dialogue is tens, and the decision never holds the dialogues of the run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, Sequence

from toolfactory.curation.complexity import query_complexity
from toolfactory.curation.dedup import SIGNATURE_VERSION, signature_row
from toolfactory.curation.records import FINISH, function_key, function_text, used_functions
from toolfactory.models import Dialogue, Record

if TYPE_CHECKING:
    from toolfactory.curation.contamination import ContaminationIndex
    from toolfactory.llm import LLMGateway


class Measure(Record):
    """One dialogue's row for the decisions of the curate stage."""

    kind: Literal["measure"] = "measure"
    id: str
    version: str = SIGNATURE_VERSION  # of the signatures below
    exact: str  # :func:`.dedup.exact_hash`
    instruction: list[int]  # MinHash hash values of the user turns
    dialogue: list[int]  # MinHash hash values of the conversation
    complexity: float | None  # eq. 1; None without a query or functions
    used: list[str]  # keys of the functions it stands for (:func:`.records.used_functions`)
    functions: dict[str, str]  # key -> text of every function it offers (``Finish`` left out)
    mode: str
    contamination: list[tuple[str, str, str, float]] = []  # (set, item, test, score) per set overlapped

    def signature_row(self, key: str) -> dict[str, object]:
        """The row :class:`.dedup.DialogueIndex` and the pool store for this dialogue."""
        return {"key": key, "version": self.version, "exact": self.exact, "instruction": self.instruction,
                "dialogue": self.dialogue}


async def measure(dialogues: Sequence[Dialogue], gateway: LLMGateway, model: str,
                  contamination: ContaminationIndex | None = None) -> list[Measure]:
    """The measures of `dialogues`, in order (their embeddings requested together), checked
    against the evaluation sets of `contamination` if given."""
    values = await query_complexity(dialogues, gateway, model) if dialogues else []
    rows = []
    for dialogue, value in zip(dialogues, values, strict=True):
        signature = signature_row("", dialogue)
        rows.append(Measure(
            id=dialogue.id,
            exact=signature["exact"],
            instruction=signature["instruction"],
            dialogue=signature["dialogue"],
            complexity=None if math.isnan(value) else value,
            used=[function_key(fn) for fn in used_functions(dialogue)],
            functions={function_key(fn): function_text(fn) for fn in dialogue.tools if fn.name != FINISH},
            mode=dialogue.mode,
            contamination=[tuple(f) for f in contamination.find(dialogue)] if contamination is not None else [],
        ))
    return rows
