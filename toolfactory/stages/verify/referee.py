"""The referee: the LLM judges measured against execution's verdicts, in every run that executes.

Most records of a run are decided by the judges alone (their tools were played by an LLM), and a
judge model's accuracy is not known in advance. Where a dialogue's calls really ran, the execution
layer has decided it without any model's opinion: its replay reproduced what the dialogue
recorded (or reached the task's target state), or it did not. The verify stage therefore also
asks the judges about a seeded sample of those dialogues, and about the factory's own labelled
corruptions of them, and counts where the judges and execution agree. The judges' verdicts on the
sample never decide a record: the truth is execution's, and the judges are measured against it.

What is refereed, per verify shard (``Sample`` in :mod:`.stage`):

* **origins.** A dialogue the execution layer accepted (``executed_accepted``: the truth is
  "passes") or rejected because the replay got another state or another deterministic result
  (``exec_state_mismatch``, ``exec_result_mismatch``: the truth is "fails"). A dialogue rejected
  for another reason (its source did not start, the rule layer) says nothing about the judges.
* **corruptions** of an accepted one (:func:`corrupt`), each labelled "fails" by construction:
  ``corrupt_dropped_call`` (an executed call and its answer removed: the task is not done),
  ``corrupt_changed_argument`` (one argument of an executed call changed, its recorded answer
  kept), ``corrupt_wrong_answer`` (the final answer's numbers changed, or the answer replaced by a
  claim that nothing came back). The kind is chosen from a hash of the dialogue's id.
* **the sample.** Each candidate's draw (:func:`draw`) is a hash of the run's seed and its id, so
  a shard run again refers the same dialogues: those whose draw is below ``verify.referee_share``,
  topped up to ``verify.referee_min`` per shard (all when fewer) by the lowest draws of the others.

Every aspect of ``verify.judges`` is asked, with the run's votes and call shape, including the
aspects whose votes execution makes unnecessary on the records it decides
(``verify.execution_answers``): the referee is what measures what those votes would have said. A
drawn dialogue that execution accepted is asked every aspect by the requests that decide it (the
aspects execution answers are then counted, never applied), so it costs no request of its own.

The counts go to the verify stage's profile, dimension :data:`REFEREE`, one value per (judge
model, aspect, origin, the judges' verdict), the aspect :data:`ALL` holding the record's overall
verdict (every aspect passes). :func:`figures` turns them into agreement, false accepts and false
rejects per judge model and aspect; the floor ``verify.judge_min_agreement`` reads the overall
row (:func:`below_agreement`). Records the judges decided alone are counted too
(:data:`JUDGED_ALONE`), so the report can state the judges' expected error on them.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from toolfactory.models import Dialogue, Judgement, Message

REFEREE = "referee"
"""Profile dimension of the verify stage: ``model|aspect|origin|pass`` or ``…|fail`` -> count."""
JUDGED_ALONE = "judged_alone"
"""Profile dimension of the verify stage: records the judges decided with no execution, by verdict."""
ALL = "all"
"""The aspect row of a record's overall verdict: every aspect asked passes."""
ACCEPTED = "executed_accepted"
MISMATCHES = ("exec_state_mismatch", "exec_result_mismatch")
DROPPED_CALL = "corrupt_dropped_call"
CHANGED_ARGUMENT = "corrupt_changed_argument"
WRONG_ANSWER = "corrupt_wrong_answer"
CORRUPTIONS = (DROPPED_CALL, CHANGED_ARGUMENT, WRONG_ANSWER)
ORIGINS = (ACCEPTED, *MISMATCHES, *CORRUPTIONS)
_SEP = "|"


def truth(origin: str) -> bool:
    """Whether a record of `origin` passes, as execution (or the corruption's label) says."""
    return origin == ACCEPTED


def origin_of(reasons: Iterable[str]) -> str | None:
    """The referee origin of an executed dialogue with these rejection `reasons` (none: accepted),
    or None when the rejection says nothing a judge could see (a source that did not start, a rule)."""
    found = set(reasons)
    if not found:
        return ACCEPTED
    mismatches = [code for code in MISMATCHES if code in found]
    return mismatches[0] if mismatches and found <= set(MISMATCHES) else None


def draw(seed: int, key: str) -> float:
    """A number in [0, 1) fixed by `seed` and `key`."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# --- corruptions -------------------------------------------------------------------------------

def _executed_names(dialogue: Dialogue) -> set[str]:
    executed = dialogue.generation.get("execution") or {}
    return {str(c.get("name")) for c in executed.get("calls") or [] if isinstance(c, dict)}


def _executed_calls(dialogue: Dialogue) -> list[tuple[int, int]]:
    names = _executed_names(dialogue)
    return [(i, j) for i, m in enumerate(dialogue.messages) for j, c in enumerate(m.tool_calls or []) if c.name in names]


def final_answer(dialogue: Dialogue) -> int | None:
    """The index of the last assistant message with text and no calls, or None."""
    for i in range(len(dialogue.messages) - 1, -1, -1):
        message = dialogue.messages[i]
        if message.role == "assistant" and (message.content or "").strip() and not message.tool_calls:
            return i
    return None


def _drop_call(dialogue: Dialogue, rng: random.Random) -> Dialogue | None:
    calls = _executed_calls(dialogue)
    if not calls:
        return None
    i, j = rng.choice(calls)
    out = dialogue.model_copy(deep=True)
    message = out.messages[i]
    dropped = message.tool_calls.pop(j)  # type: ignore[union-attr]
    keep: list[Message] = []
    for k, m in enumerate(out.messages):
        if m.role == "tool" and m.tool_call_id == dropped.id:
            continue
        if k == i and not m.tool_calls:
            m.tool_calls = None
            if not (m.content or "").strip():
                continue
        keep.append(m)
    out.messages = keep
    return out


def _changed(value: Any, schema: Mapping[str, Any], rng: random.Random) -> Any:
    """Another value of the same type: another enum member, a shifted number, reversed text."""
    options = [v for v in schema.get("enum") or [] if v != value] if isinstance(schema, Mapping) else []
    if options:
        return rng.choice(options)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.randint(3, 29)
    if isinstance(value, float):
        return round(value * 1.5 + 7.25, 4)
    if isinstance(value, str) and len(value.strip()) > 1:
        changed = value[::-1]
        return changed if changed != value else value + "x"
    return None


def _change_argument(dialogue: Dialogue, rng: random.Random) -> Dialogue | None:
    functions = {f.name: f for f in reversed(dialogue.tools)}
    options: list[tuple[int, int, str, Any]] = []
    for i, j in _executed_calls(dialogue):
        call = dialogue.messages[i].tool_calls[j]  # type: ignore[index]
        try:
            arguments = json.loads(call.arguments or "{}")
        except (json.JSONDecodeError, RecursionError):
            continue
        if not isinstance(arguments, dict):
            continue
        properties = (functions[call.name].parameters.get("properties") or {}) if call.name in functions else {}
        for key, value in arguments.items():
            new = _changed(value, properties.get(key) or {}, rng)
            if new is not None and new != value:
                options.append((i, j, key, new))
    if not options:
        return None
    i, j, key, new = rng.choice(options)
    out = dialogue.model_copy(deep=True)
    call = out.messages[i].tool_calls[j]  # type: ignore[index]
    arguments = json.loads(call.arguments or "{}")
    arguments[key] = new
    call.arguments = json.dumps(arguments, ensure_ascii=False)
    return out


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
NOTHING_CAME_BACK = "I'm sorry, the tool returned nothing for this request, so I could not find an answer."


def _wrong_answer(dialogue: Dialogue, rng: random.Random) -> Dialogue | None:
    index = final_answer(dialogue)
    if index is None:
        return None
    out = dialogue.model_copy(deep=True)
    text = out.messages[index].content or ""
    shift = rng.randint(3, 29)
    changed = _NUMBER.sub(lambda m: str(int(float(m.group(0))) + shift), text)
    out.messages[index].content = changed if changed != text else NOTHING_CAME_BACK
    return out


_MAKERS = {DROPPED_CALL: _drop_call, CHANGED_ARGUMENT: _change_argument, WRONG_ANSWER: _wrong_answer}


def corrupt(dialogue: Dialogue, seed: int = 0) -> tuple[str, Dialogue] | None:
    """One labelled corruption of an executed dialogue: the kind drawn from its id (the next kind
    when that one does not apply), or None when none applies."""
    start = int(draw(seed, f"kind:{dialogue.id}") * len(CORRUPTIONS))
    rng = random.Random(f"{seed}:{dialogue.id}")
    for k in range(len(CORRUPTIONS)):
        kind = CORRUPTIONS[(start + k) % len(CORRUPTIONS)]
        made = _MAKERS[kind](dialogue, rng)
        if made is not None and made.messages != dialogue.messages:
            made.id = f"{dialogue.id}:{kind}"
            return kind, made
    return None


# --- counting and figures ----------------------------------------------------------------------

def _clean(text: str) -> str:
    return text.replace(_SEP, "/")


def tally(model: str, origin: str, judgements: list[Judgement]) -> Counter[str]:
    """The profile values of one refereed record: one per aspect and one for the record (:data:`ALL`)."""
    counts: Counter[str] = Counter()
    for j in judgements:
        counts[_SEP.join((_clean(model), j.aspect, origin, "pass" if j.passes else "fail"))] += 1
    overall = all(j.passes for j in judgements)
    counts[_SEP.join((_clean(model), ALL, origin, "pass" if overall else "fail"))] += 1
    return counts


@dataclass(frozen=True)
class Figure:
    """How one judge model's aspect (or its overall verdict) agreed with execution."""

    model: str
    aspect: str
    records: int
    agree: int
    false_accepts: int
    """Records execution (or the label) fails that the judges passed."""
    false_rejects: int
    """Records execution passed that the judges failed."""
    passing: int
    """Records execution passed (the others fail)."""

    @property
    def agreement(self) -> float | None:
        return self.agree / self.records if self.records else None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "aspect": self.aspect, "records": self.records, "agree": self.agree,
                "agreement": None if self.agreement is None else round(self.agreement, 4),
                "false_accepts": self.false_accepts, "false_rejects": self.false_rejects,
                "execution_passed": self.passing, "execution_failed": self.records - self.passing}


def figures(counts: Mapping[str, int]) -> list[Figure]:
    """Per (judge model, aspect), from the :data:`REFEREE` profile counts; the overall row first."""
    cells: dict[tuple[str, str], Counter[str]] = {}
    for value, n in counts.items():
        parts = value.split(_SEP)
        if len(parts) != 4 or parts[2] not in ORIGINS:
            continue
        model, aspect, origin, verdict = parts
        expected, judged = truth(origin), verdict == "pass"
        cell = cells.setdefault((model, aspect), Counter())
        cell["records"] += n
        cell["passing"] += n * expected
        cell["agree"] += n * (expected == judged)
        cell["false_accepts"] += n * (judged and not expected)
        cell["false_rejects"] += n * (expected and not judged)
    return [Figure(model, aspect, c["records"], c["agree"], c["false_accepts"], c["false_rejects"], c["passing"])
            for (model, aspect), c in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] != ALL, kv[0][1]))]


def by_origin(counts: Mapping[str, int]) -> dict[str, int]:
    """Refereed records per origin (each record counted once, through its overall row)."""
    out: Counter[str] = Counter()
    for value, n in counts.items():
        parts = value.split(_SEP)
        if len(parts) == 4 and parts[1] == ALL:
            out[parts[2]] += n
    return dict(out)


def expected_error(figure: Figure, judged_alone: int) -> float | None:
    """The judges' expected wrong decisions among `judged_alone` records: their disagreement rate
    with execution times those records (assuming the refereed records are like the others)."""
    return None if figure.agreement is None else (1 - figure.agreement) * judged_alone


def below_agreement(floor: float, counts: Mapping[str, int]) -> str | None:
    """The sentence of ``verify.judge_min_agreement`` when a judge model is below `floor` (or when
    nothing was refereed, so the floor cannot be checked); None when every model reaches it."""
    overall = [f for f in figures(counts) if f.aspect == ALL]
    if not overall:
        return ("verify.judge_min_agreement: no dialogue was refereed (no executed dialogue reached the judges), "
                "so the judges' agreement with execution is unknown")
    for f in overall:
        if f.agreement is not None and f.agreement < floor:
            return (f"verify.judge_min_agreement: the judges ({f.model}) agreed with execution on {f.agreement:.1%} of "
                    f"{f.records} refereed record(s) ({f.false_accepts} false accept(s), {f.false_rejects} false "
                    f"reject(s)), below {floor:.1%}")
    return None
