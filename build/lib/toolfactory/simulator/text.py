"""Words in, words out: tokenising prompts, estimating token counts, writing short sentences.

The simulator has no language model, so "on-topic" answers are assembled from the content
words of the prompt. Token counts are a character-based estimate because a real tokenizer
(tiktoken) would need to download its vocabulary, which is impossible offline.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just let me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own please same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves tell show give get find need want like know also using use via i'm what's it's
    can't don't hi hello thanks thank could would might must shall may""".split()
)


def words(text: str) -> list[str]:
    """The word tokens of `text`, original case, in order."""
    return _WORD.findall(text)


def lower_words(text: str) -> list[str]:
    """Lower-case word tokens of `text`."""
    return [word.lower() for word in words(text)]


def content_words(text: str) -> list[str]:
    """Non-stopword tokens of `text` in order of first appearance, duplicates removed."""
    seen: set[str] = set()
    result: list[str] = []
    for word in words(text):
        key = word.lower()
        if key in STOPWORDS or key in seen or len(key) < 2:
            continue
        seen.add(key)
        result.append(word)
    return result


def identifier_words(name: str) -> list[str]:
    """Split an identifier like `getWeather_forecast` into lower-case words."""
    parts = re.split(r"[_\-.\s/]+", _CAMEL.sub(" ", name))
    return [part.lower() for piece in parts for part in piece.split() if part]


def message_text(content: Any) -> str:
    """The text of an OpenAI message `content` (a string or a list of content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces: list[str] = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    pieces.append(text)
        return " ".join(pieces)
    return str(content)


def estimate_tokens(text: str) -> int:
    """Roughly OpenAI-sized token count: one token per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def join_phrase(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


_OPENERS = (
    "Regarding {topic}, the short answer is that it mainly depends on {k1} and {k2}.",
    "Here is a concise overview of {topic}: start with {k1}, then look at {k2}.",
    "Good question about {topic}. The key points to consider are {k1} and {k2}.",
    "When it comes to {topic}, {k1} matters most, followed closely by {k2}.",
)
_FOLLOW_UPS = (
    "In practice, {k3} is usually the deciding factor.",
    "If you share more details about {k3}, I can give a more specific answer.",
    "A good next step is to compare the options for {k3}.",
    "Keep in mind that {k3} can change the outcome.",
)


def topical_answer(prompt: str, rng: random.Random) -> str:
    """A short, sentence-like answer that reuses the prompt's content words."""
    keys = content_words(prompt)
    if not keys:
        return rng.choice(
            (
                "Hello! How can I help you today?",
                "Sure - could you tell me a little more about what you need?",
            )
        )
    topic = " ".join(keys[:4])
    rest = [word for word in keys[4:] if len(word) > 3] or [w for w in keys if len(w) > 3] or keys
    k1 = rng.choice(rest)
    k2 = rng.choice([word for word in rest if word != k1] or ["the details"])
    k3 = rng.choice([word for word in rest if word not in (k1, k2)] or [topic])
    sentences = [rng.choice(_OPENERS).format(topic=topic, k1=k1, k2=k2)]
    sentences.append(rng.choice(_FOLLOW_UPS).format(k3=k3))
    return " ".join(sentences)


def truncate_words(text: str, max_tokens: int) -> str:
    """Cut `text` at a word boundary so that its token estimate is at most `max_tokens`."""
    budget = max(0, max_tokens) * 4
    if len(text) <= budget:
        return text
    cut = text[:budget]
    space = cut.rfind(" ")
    return cut[:space] if space > 0 else cut


def dedupe(items: Iterable[str]) -> list[str]:
    """Items in order with case-insensitive duplicates removed."""
    seen: set[str] = set()
    result: list[str] = []
    for item in items:
        key = item.lower()
        if key not in seen:
            seen.add(key)
            result.append(item)
    return result
