"""Yes/no verdicts that follow what is judged and the question asked, not the request's wording.

A model asked whether a text passes a check answers from the text and the check, whether the
question comes alone (``<material>\\n\\nQuestion: <question>``, answered in a boolean field) or
with others in one request (``<material>\\n\\nQuestions: …``, a field per question whose schema
``description`` is the question). The simulator does the same: a boolean of a JSON answer that
answers a question it can identify — the nearest ``description`` on the field's schema path,
else the prompt's single ``Question:``, in the latest user message that asks one (a re-ask after
an answer that did not fit its schema still answers the same question) — is drawn from the material, the question and the field
name, true with ``boolean_true_rate``. A resample (a request with a ``seed``) draws it anew with
probability ``sample_variation`` and otherwise repeats the first sample's verdict, as sampling
at a low temperature does. Booleans with no identifiable question stay per-request draws. With
probability ``judge_scrutiny`` a verdict is instead what a careful reading of the material finds
(:mod:`.scrutiny`): the simulator then behaves as a better judge.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from toolfactory.stages import prompt_markers as said

from .scrutiny import passes
from .seeding import unit_draw
from .settings import SimulatorSettings
from .text import message_text

_QUESTIONS = re.compile(rf"\n\s*\n(?:{re.escape(said.JUDGE_QUESTIONS)}|{re.escape(said.JUDGE_QUESTION)})\s*", re.I)


def _asking(messages: list[dict[str, Any]]) -> str | None:
    """The latest user message that asks a question: after a re-ask (the answer did not fit
    its schema) the question is still the one asked before."""
    for message in reversed(messages):
        if message.get("role") == "user":
            text = message_text(message.get("content"))
            if _QUESTIONS.search(text):
                return text
    return None


def settle(value: Any, schema: dict[str, Any] | None, messages: list[dict[str, Any]], settings: SimulatorSettings,
           seed: int) -> Any:
    """`value` with each boolean that answers an identifiable question re-drawn (see module doc)."""
    user_text = _asking(messages)
    split = _QUESTIONS.search(user_text) if user_text else None
    if user_text is None or split is None or not isinstance(schema, dict):
        return value
    quoted = user_text[: split.start()]
    material = hashlib.sha256(quoted.encode()).hexdigest()
    careful: list[bool] = []  # the careful reading, made once and only when a verdict follows it
    asked = user_text[split.end():].strip()
    single = None if split.group(0).strip().lower().startswith("questions") else asked

    def verdict(question: str, name: str) -> bool:
        sample = seed if seed and unit_draw(material, question, name, seed, "variation") < settings.sample_variation else 0
        if settings.judge_scrutiny and unit_draw(material, question, name, sample, "scrutiny") < settings.judge_scrutiny:
            if not careful:
                careful.append(passes(quoted))
            return careful[0]
        return unit_draw(material, question, name, sample) < settings.boolean_true_rate

    def walk(item: Any, node: Any, question: str | None, name: str) -> Any:
        node = node if isinstance(node, dict) else {}
        question = node.get("description") if isinstance(node.get("description"), str) else question
        if isinstance(item, bool):
            return verdict(question, name) if question else item
        if isinstance(item, dict):
            properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
            return {key: walk(sub, properties.get(key), question, key) for key, sub in item.items()}
        if isinstance(item, list):
            return [walk(sub, node.get("items"), question, name) for sub in item]
        return item

    return walk(value, schema, single, "")
