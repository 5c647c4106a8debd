"""What an endpoint says it is: the provenance of every record a run makes with it.

`llm.provider` is what the operator wrote; it does not say who answered. A docker-compose stack
points `openai-compatible` at the simulator, and a proxy may serve any model under any name. The
run therefore records what the endpoint itself reports: the models it lists (`GET /models`, with
their `owned_by`), the HTTP `Server` of that answer, and who signed the answers the run saw (each
chat answer's `model` and `system_fingerprint`). The label derived from it goes to the manifest,
the stats, the report and every export; a run whose endpoint identifies as toolfactory's
simulator is labelled simulated whatever the config says.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

import openai

from toolfactory.llm.endpoint import Endpoint

# How toolfactory's simulator identifies itself, as any server would: the owner of the models it
# lists and the fingerprint it signs its answers with. The simulator, a program of its own, sends
# them (toolfactory/simulator/app.py, chat.py); tests/test_identity.py holds the two to each other.
SIMULATOR_OWNER = "toolfactory-simulator"
SIMULATOR_FINGERPRINT = "fp_toolfactory_sim"
SIMULATED_LABEL = "simulated: made with toolfactory's offline LLM simulator, not real training data"


@dataclass(frozen=True)
class EndpointIdentity:
    """The endpoint's own account of itself (see the module doc)."""

    base_url: str  # without credentials, query or fragment
    models: dict[str, str] = field(default_factory=dict)  # model id -> owned_by, as listed
    server: str | None = None  # the HTTP Server header of the model list
    served_by: dict[str, int] = field(default_factory=dict)  # "model (fingerprint)" -> answers
    unlisted: str | None = None  # why the endpoint did not list its models
    # A run recorded before endpoints were identified, whose config named the simulator: the one
    # case where the label comes from the config.
    assumed_simulator: bool = False

    @property
    def simulated(self) -> bool:
        return (self.assumed_simulator or SIMULATOR_OWNER in self.models.values()
                or any(SIMULATOR_FINGERPRINT in who for who in self.served_by))

    @property
    def label(self) -> str:
        """One line for a report, a card or a log: who made the data."""
        if self.simulated:
            return SIMULATED_LABEL
        answered = sorted(self.served_by, key=lambda who: (-self.served_by[who], who))
        names = answered or sorted(f"{model} ({owner})" if owner else model for model, owner in self.models.items())
        return f"LLM output of {', '.join(names[:6]) or 'an unidentified endpoint'} at {self.base_url}"

    def with_answers(self, served_by: Mapping[str, int]) -> EndpointIdentity:
        """This identity with more answers counted (the probes', a run's)."""
        merged = dict(self.served_by)
        for who, count in served_by.items():
            merged[who] = merged.get(who, 0) + int(count)
        return EndpointIdentity(self.base_url, dict(self.models), self.server, merged, self.unlisted, self.assumed_simulator)

    def covered_by(self, other: EndpointIdentity) -> bool:
        """Whether `other` already names everything this identity says (its endpoint, models and
        the signers of its answers)."""
        return (self.base_url in other.base_url.split(", ") and self.models.items() <= other.models.items()
                and set(self.served_by) <= set(other.served_by))

    def merged(self, other: EndpointIdentity) -> EndpointIdentity:
        """Both endpoints as one (a re-run that finished the run at another endpoint): the data is
        labelled with everything that made it."""
        base = self.base_url if other.base_url in ("", self.base_url) else f"{self.base_url}, {other.base_url}"
        both = EndpointIdentity(base, {**self.models, **other.models}, self.server or other.server, {}, self.unlisted,
                                self.assumed_simulator or other.assumed_simulator)
        return both.with_answers(self.served_by).with_answers(other.served_by)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "simulated": self.simulated, "label": self.label}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointIdentity:
        return cls(str(data.get("base_url", "")), dict(data.get("models") or {}), data.get("server"),
                   {str(k): int(v) for k, v in (data.get("served_by") or {}).items()}, data.get("unlisted"),
                   bool(data.get("assumed_simulator")))


def public_url(url: str) -> str:
    """`url` without what may carry a secret (user info, query, fragment)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


IDENTIFY_TIMEOUT_S = 30.0
IDENTIFY_RETRIES = 2


async def identify(endpoint: Endpoint, timeout_s: float = IDENTIFY_TIMEOUT_S) -> EndpointIdentity:
    """Ask `endpoint` what it serves (`GET /models`); an endpoint without that route (some proxies)
    is identified by its answers alone, and says why in `unlisted`."""
    identity, _ = await list_models(endpoint, timeout_s)
    return identity


async def list_models(endpoint: Endpoint, timeout_s: float = IDENTIFY_TIMEOUT_S) -> tuple[EndpointIdentity, openai.OpenAIError | None]:
    """:func:`identify`, with the error that kept the endpoint from listing its models (None: it
    listed them). Never cached: whether anything answers at the endpoint now is part of the answer."""
    base = public_url(endpoint.base_url)
    async with openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=timeout_s, max_retries=IDENTIFY_RETRIES) as client:
        try:
            raw = await client.models.with_raw_response.list()
        except openai.OpenAIError as exc:
            return EndpointIdentity(base, unlisted=f"{type(exc).__name__}: {exc}"[:300]), exc
        page = raw.parse()
        models = {model.id: str(getattr(model, "owned_by", "") or "") for model in page.data}
        return EndpointIdentity(base, models, raw.headers.get("server")), None


def served_by_of(by_role: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The answers' signers summed over a usage dict by role (see UsageMeter.to_dict)."""
    usages = by_role.values() if isinstance(by_role, Mapping) else by_role
    total: dict[str, int] = {}
    for usage in usages:
        for who, count in (usage.get("served_by") or {}).items():
            total[who] = total.get(who, 0) + int(count)
    return total
