"""The LLM gateway: toolfactory's only way to an LLM.

An async openai client with bounded concurrency; retries of 429 / 5xx / timeouts / connection
errors with exponential backoff and full jitter that honour ``Retry-After``; structured answers
checked against their JSON Schema with a bounded number of re-asks; usage accounting; and the
content-addressed request cache. A request that still fails raises :class:`LLMFailure` with a
reason code, which the calling stage turns into a rejected record: one bad request never crashes
a shard. Endpoint misconfiguration (401/403/404) is a :class:`TerminalError` instead, since every
record would fail the same way. With a run-wide rate limit or budget, every attempt first takes a
permit from the run's shared limit (:mod:`toolfactory.llm.limits`), and a ``Retry-After`` pauses
every worker of the run. Requests that share a long prompt beginning go one first, the others once
it is answered, so that the endpoint's prompt cache serves them (:mod:`toolfactory.llm.prefixes`).
Samples of one prompt asked together (votes) go as one request with ``n`` choices where the
endpoint answers them (:meth:`LLMGateway.structured_samples`).
"""

from __future__ import annotations

import asyncio
import json
import time
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, Awaitable, Callable, Sequence

import openai
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from toolfactory.config import LLMConfig
from toolfactory.errors import LLMFailure, TerminalError
from toolfactory.llm.answers import extract_json, split_reasoning
from toolfactory.llm.cache import RequestCache, request_key
from toolfactory.llm.endpoint import Endpoint
from toolfactory.llm.limits import SharedLimit
from toolfactory.llm.parameters import refused_parameter, role_parameters
from toolfactory.llm.prefixes import SharedPrefixes
from toolfactory.llm.refusals import RefusalCounter, endpoint_message
from toolfactory.llm.text_tools import parse_text_calls, text_messages
from toolfactory.llm.usage import RoleUsage, UsageMeter, cached_tokens
from toolfactory.models import canonical_json
from toolfactory.render import CallFormatError

Message = dict[str, Any]
_MISSING = object()  # a sample not (yet) answered


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _refused_connection(exc: BaseException) -> OSError | None:
    """The socket error under an openai connection error, unless it is a timeout.

    openai's aiohttp transport reports a refused connection (nothing listens at the port) as an
    ``APITimeoutError`` over aiohttp's ``ClientConnectorError``; only the cause chain tells the two
    apart. Timeouts are ``OSError`` too (``TimeoutError``), hence the exclusion."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, openai.APIConnectionError) and _refused_connection(exc) is not None:
        return "llm_connection_error"
    if isinstance(exc, openai.APITimeoutError):
        return "llm_timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "llm_connection_error"
    if isinstance(exc, openai.RateLimitError):
        return "llm_rate_limited"
    if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
        return "llm_server_error"
    return "llm_bad_request"


# What to change when an endpoint refuses a request: the message names the config fields (the
# run's preflight chooses them where they are `auto`; this is what a run checked elsewhere needs).
_BAD_REQUEST_HINT = (
    "if the endpoint refuses a parameter, set llm.roles.{role}.max_tokens_parameter: max_completion_tokens, "
    "llm.roles.{role}.temperature: null, llm.tool_calling: text or llm.structured_output: prompt"
)


def _connection_message(exc: openai.APIConnectionError) -> str:
    """openai's message, with the socket's reason when there is one ("Connection error." alone
    does not say that nothing listens at the port)."""
    cause = _refused_connection(exc)
    if cause is None:
        return str(exc)
    return f"cannot connect to the endpoint: {type(cause).__name__}: {cause}"


def connection_failure(exc: openai.APIConnectionError) -> tuple[str, str]:
    """The reason code (`llm_connection_error`, `llm_timeout`) of a request that got no answer,
    and what failed: the socket's error when there is one."""
    cause = _refused_connection(exc)
    return _reason(exc), f"{type(cause or exc).__name__}: {cause or exc}"


def _explained(exc: openai.APIStatusError, role: str) -> str:
    if exc.status_code in (400, 422):
        return f"{exc} ({_BAD_REQUEST_HINT.format(role=role)})"
    return str(exc)


def with_schema(messages: Sequence[Message], schema: dict[str, Any]) -> list[Message]:
    """`messages` with the JSON Schema written into the last user turn, for endpoints that
    cannot constrain the answer to a schema (``json_object``, ``prompt``)."""
    instruction = ("Answer with only a JSON value (no other text) that fits this JSON Schema:\n"
                   + json.dumps(schema, ensure_ascii=False))
    out = list(messages)
    if out and out[-1].get("role") == "user" and isinstance(out[-1].get("content"), str):
        out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n\n{instruction}"}
    else:
        out.append({"role": "user", "content": instruction})
    return out


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The delay an endpoint asked for (``retry-after-ms`` or ``Retry-After``), if any."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    if "retry-after-ms" in headers:
        try:
            return float(headers["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _http_client() -> Any:
    """openai's aiohttp transport (its extra ``openai[aiohttp]``), else its default httpx one.

    Measured at 64 requests in flight: ~1.9 ms of CPU per request against ~2.7, which is the
    gateway's floor wherever the client's CPU, not the endpoint, is the limit."""
    try:
        return openai.DefaultAioHttpClient(verify=_tls_context())
    except RuntimeError:  # openai installed without the extra
        return None


@lru_cache(maxsize=1)
def _tls_context() -> Any:
    """The TLS context the SDK's client would build (its trust store, or SSL_CERT_FILE /
    SSL_CERT_DIR), built once per process and shared by every gateway: loading the trust store
    takes about 30 ms of CPU, more than a request to a local endpoint, and a run makes a gateway
    per shard and per preflight probe."""
    try:
        import httpx2  # the SDK's own HTTP client, whose default this is
    except ImportError:
        return True
    return httpx2.create_ssl_context()


@lru_cache(maxsize=4096)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=Draft202012Validator.FORMAT_CHECKER)


class LLMGateway:
    def __init__(
        self,
        endpoint: Endpoint,
        llm: LLMConfig,
        cache: RequestCache | None = None,
        meter: UsageMeter | None = None,
        limit: SharedLimit | None = None,
    ) -> None:
        self._llm = llm
        self._limit = limit  # None: no run-wide limit or budget, and no cost per request
        self._cache = cache if llm.cache else None
        self.meter = meter or UsageMeter()
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            timeout=llm.timeout_s,
            max_retries=0,  # retries are ours: they honour Retry-After and are counted
            http_client=_http_client(),
        )
        self._slots = asyncio.Semaphore(llm.max_concurrency)
        self.prefixes = SharedPrefixes(llm.prefix_cache_min_tokens)
        self._one_choice: set[str] = set()  # roles whose endpoint answered fewer choices than `n` asked
        self._many_choices: set[str] = set()  # roles whose endpoint answered every choice asked
        self._choices_probe = asyncio.Lock()
        self.refusals = RefusalCounter(llm.max_repeated_refusals)
        self._backoff = wait_random_exponential(multiplier=llm.backoff_initial_s, max=llm.backoff_max_s)

    async def aclose(self) -> None:
        await self._client.close()
        if self._limit is not None:
            await self._limit.aclose()
        if self._cache is not None:
            await self._cache.aclose()

    async def __aenter__(self) -> LLMGateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def model_for(self, role: str) -> str:
        return self._llm.roles[role].model  # type: ignore[index]

    # --- chat ------------------------------------------------------------------------------

    async def chat(
        self,
        role: str,
        messages: Sequence[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        response_format: dict[str, Any] | None = None,
        sample: int = 0,
        call_format: str | None = None,
    ) -> Message:
        """One assistant message (``content`` and/or ``tool_calls``) for `role`'s model.

        The content is the answer only: a model's reasoning is taken out of it (and kept under
        ``reasoning`` when ``llm.keep_reasoning``). In text tool-calling mode the calls written
        in the content come back as ``tool_calls``, as from a native call. `call_format` asks for
        text mode in that format whatever the role's setting (an agent whose prompt is written
        for one format, like ToolAlpaca's ReAct assistant)."""
        params = self._llm.role(role)
        text_tools = bool(tools) and (call_format is not None or self._llm.tool_calling_for(role) == "text")
        text_format = call_format or self._llm.text_call_format
        request: dict[str, Any] = {
            "model": params.model,
            "messages": text_messages(messages, tools or [], text_format) if text_tools else list(messages),
        }
        # Only what the role's model accepts is sent: reasoning models refuse `temperature`
        # and (OpenAI's) `max_tokens`, so each is configurable per role (chosen by preflight
        # where `auto`), and the cache key is the request as sent.
        request.update(role_parameters(params))
        if tools and not text_tools:
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        if response_format is not None:
            request["response_format"] = response_format
        if sample:
            # Distinct, reproducible samples of one prompt (votes, self-consistency): providers
            # that honour `seed` (OpenAI, vLLM) sample differently per index, and so does the cache.
            request["seed"] = sample
        request_id, reply = await self._finished(role, request, sample)
        reasoning, content = split_reasoning(reply)
        message: Message = {"role": "assistant", "content": content}
        if reasoning is not None and self._llm.keep_reasoning:
            message["reasoning"] = reasoning
        if text_tools and content:
            try:
                message["content"], message["tool_calls"] = parse_text_calls(content, text_format, request_id)
            except CallFormatError as exc:
                raise self._failure(role, "llm_malformed_tool_call", f"calls written as text do not parse: {exc}") from None
        elif reply.get("tool_calls"):
            message["tool_calls"] = reply["tool_calls"]
        return message

    async def _finished(self, role: str, request: dict[str, Any], sample: int) -> tuple[str, Message]:
        """(the request's key, the first choice's message) of an answer the model finished.

        An answer cut at the token limit is asked once more with the role's larger limit (the
        same answer re-asked with the same limit would be cut again); a filtered or refused
        answer has its own reason code, so the stats tell them from malformed output."""
        params = self._llm.role(role)
        limit_field = params.max_tokens_field
        while True:
            key, response = await self._complete(role, request, sample)
            choices = response.get("choices") or []
            if not choices or not isinstance(choices[0].get("message"), dict):
                raise LLMFailure("llm_empty_answer", "the endpoint returned no choice", transient=False)
            choice = choices[0]
            finish = choice.get("finish_reason")
            if finish == "length":
                if request[limit_field] < params.truncation_limit:
                    self.meter.role(role).reasks += 1
                    request = {**request, limit_field: params.truncation_limit}
                    continue
                raise self._failure(role, "llm_truncated", f"the answer was cut at {limit_field}={request[limit_field]} "
                                    f"(raise llm.roles.{role}.max_tokens_ceiling)")
            if finish == "content_filter":
                raise self._failure(role, "llm_content_filter", "the endpoint's content filter stopped the answer")
            refusal = choice["message"].get("refusal")
            if refusal:
                raise self._failure(role, "llm_refused", f"the model refused: {str(refusal)[:200]}")
            return key, choice["message"]

    def _failure(self, role: str, reason: str, message: str) -> LLMFailure:
        self.meter.role(role).failures[reason] += 1
        return LLMFailure(reason, message, transient=False)

    async def _complete(self, role: str, request: dict[str, Any], sample: int) -> tuple[str, dict[str, Any]]:
        usage = self.meter.role(role)
        key = request_key({**request, "sample": sample})
        if self._cache is not None:
            cached = await self._cache.get(key)
            if cached is not None:
                usage.cache_hits += 1
                usage.answered_by(cached)
                return key, cached
        started = time.perf_counter()
        try:
            async with self.prefixes.turn(request):
                body, response = await self._send(lambda: self._client.post("/chat/completions", body=request, cast_to=bytes), usage)
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403, 404):
                raise TerminalError(
                    f"the LLM endpoint refused the request ({exc.status_code}): check llm.base_url, "
                    f"the model names and the API key ({exc.message})"
                ) from None
            usage.failures[_reason(exc)] += 1
            if not _is_transient(exc):
                self.refusals.refused(role, request["model"], request, exc)  # stops the stage past the limit
            raise LLMFailure(_reason(exc), _explained(exc, role), transient=_is_transient(exc),
                             detail=endpoint_message(exc), parameter=refused_parameter(exc, request)) from None
        except openai.APIConnectionError as exc:
            usage.failures[_reason(exc)] += 1
            raise LLMFailure(_reason(exc), _connection_message(exc), transient=True) from None
        self.refusals.answered(role, request)
        usage.calls += 1
        usage.answered_by(response)
        usage.latency_s += time.perf_counter() - started
        counted = response.get("usage") or {}
        prompt, completion = int(counted.get("prompt_tokens") or 0), int(counted.get("completion_tokens") or 0)
        cached = min(cached_tokens(counted), prompt)
        usage.prompt_tokens += prompt
        usage.cached_prompt_tokens += cached
        usage.completion_tokens += completion
        if self._limit is not None:
            self._limit.spent(role, prompt, completion, cached)
        if self._cache is not None:
            self._cache.put(key, body)
        return key, response

    async def _send(self, call: Callable[[], Awaitable[Any]], usage: RoleUsage) -> tuple[bytes, dict[str, Any]]:
        """`call` (a request for the body's bytes) with bounded concurrency and retries; its JSON
        body, as sent and parsed.

        The request goes out as built, through the client's ``post``: ``create`` would walk it
        against the parameters' type hints first (measured: ~0.8 ms of CPU per request, over a
        third of the client's), and parse the answer into pydantic models the gateway does not
        use. The raw body is what the cache stores and what the stages read."""
        def count_retry(_: RetryCallState) -> None:
            usage.retries += 1

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._llm.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_is_transient),
            before_sleep=count_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                async with self._slots:
                    if self._limit is not None:
                        await self._limit.acquire()
                    try:
                        body: bytes = await call()
                    except openai.RateLimitError as exc:
                        asked = retry_after_seconds(exc)
                        if self._limit is not None and asked is not None:
                            # The whole run waits, not this request only (and whether it is retried or not).
                            self._limit.pause(min(asked, self._llm.backoff_max_s))
                        raise
        return body, json.loads(body)

    def _wait(self, state: RetryCallState) -> float:
        asked = retry_after_seconds(state.outcome.exception() if state.outcome else None)
        if asked is not None:
            return min(asked, self._llm.backoff_max_s)
        return float(self._backoff(state))

    # --- structured answers -----------------------------------------------------------------

    def _structured_request(self, role: str, messages: Sequence[Message], schema: dict[str, Any],
                            name: str) -> tuple[list[Message], dict[str, Any] | None]:
        """The conversation and `response_format` that ask `role` for JSON fitting `schema`, in the
        role's structured-output mode."""
        mode = self._llm.structured_output_for(role)
        if mode == "json_schema":
            return list(messages), {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        return with_schema(messages, schema), ({"type": "json_object"} if mode == "json_object" else None)

    @staticmethod
    def _read(text: str, validator: Draft202012Validator,
              check: Callable[[Any], list[tuple[str, str]]] | None) -> tuple[Any, str, str]:
        """(the value, "", "") of an answer that fits, else (None, reason code, what is wrong)."""
        try:
            value = extract_json(text)
        except json.JSONDecodeError as exc:
            return None, "llm_malformed_json", f"is not valid JSON ({exc.msg} at char {exc.pos})"
        error = best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return None, "llm_schema_mismatch", f"does not fit the schema at {where}: {error.message}"
        problems = check(value) if check is not None else []
        if problems:
            return None, problems[0][0], "has problems: " + "; ".join(message for _, message in problems[:8])
        return value, "", ""

    async def structured(
        self,
        role: str,
        messages: Sequence[Message],
        schema: dict[str, Any],
        *,
        name: str,
        sample: int = 0,
        check: Callable[[Any], list[tuple[str, str]]] | None = None,
    ) -> Any:
        """A JSON value that fits `schema`, re-asking up to ``max_reasks`` times.

        `check` adds what a schema cannot say (an OpenAPI document that must validate, names that
        must agree): it returns (reason code, message) problems, which are sent back in the re-ask
        like a schema mismatch; the first reason code names the failure when re-asks run out.
        """
        validator = _validator(canonical_json(schema))
        conversation, response_format = self._structured_request(role, messages, schema, name)
        for attempt in range(self._llm.max_reasks + 1):
            message = await self.chat(role, conversation, response_format=response_format, sample=sample)
            text = message.get("content") or ""
            value, reason, problem = self._read(text, validator, check)
            if not reason:
                return value
            if attempt == self._llm.max_reasks:
                break
            self.meter.role(role).reasks += 1
            conversation += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"Your answer {problem}. Reply again with only JSON that fits the schema and fixes this."},
            ]
        self.meter.role(role).failures[reason] += 1
        raise LLMFailure(reason, f"answer {problem} after {self._llm.max_reasks} re-asks", transient=False)

    def groups_samples(self, role: str) -> bool:
        """Whether :meth:`structured_samples` asks `role`'s samples as one request (so far)."""
        return self._llm.multiple_choices and role not in self._one_choice

    async def structured_samples(self, role: str, messages: Sequence[Message], schema: dict[str, Any], *, name: str,
                                 first: int, count: int) -> list[Any]:
        """Samples `first` .. `first + count - 1` of :meth:`structured`'s answer, in order.

        With ``llm.multiple_choices`` they are asked as one request with ``n=count`` (seeded with
        `first`): the endpoint reads and bills the prompt once. A choice that is cut, filtered,
        refused or does not fit the schema is asked again alone, as its own sample (with its
        re-asks). An endpoint that answers with fewer choices than asked, or refuses ``n``, gets
        one request per sample for this role from then on."""
        texts: list[str | None] = []
        validator = _validator(canonical_json(schema))
        if count > 1 and self.groups_samples(role):
            conversation, response_format = self._structured_request(role, messages, schema, name)
            if role not in self._many_choices:
                # The first such request of a role finds out whether the endpoint answers `n`
                # choices; the others wait for it, so that a refusal is met once, not by every
                # request in flight.
                async with self._choices_probe:
                    if role not in self._many_choices and role not in self._one_choice:
                        texts = await self._probe_choices(role, conversation, response_format, first, count)
            if not texts and role in self._many_choices:  # not the probe: the endpoint answers `n`
                texts = await self._choices(role, conversation, response_format, first, count)
        values: list[Any] = []
        for text in texts:
            value, reason, _ = self._read(text, validator, None) if text is not None else (None, "missing", "")
            values.append(_MISSING if reason else value)
            if reason:
                self.meter.role(role).reasks += 1  # asked again below, alone
        values += [_MISSING] * (count - len(values))
        missing = [i for i, value in enumerate(values) if value is _MISSING]
        again = await asyncio.gather(*(self.structured(role, messages, schema, name=name, sample=first + i) for i in missing))
        for i, value in zip(missing, again):
            values[i] = value
        return values

    async def _probe_choices(self, role: str, messages: list[Message], response_format: dict[str, Any] | None,
                             first: int, count: int) -> list[str | None]:
        """:meth:`_choices`, remembering for `role` whether the endpoint answers every choice asked;
        a refusal (a 400 or 422, say for ``n``) means one request per sample from then on."""
        try:
            texts = await self._choices(role, messages, response_format, first, count)
        except LLMFailure as exc:
            if exc.transient:
                raise
            texts = []
        (self._many_choices if len(texts) == count else self._one_choice).add(role)
        return texts

    async def _choices(self, role: str, messages: list[Message], response_format: dict[str, Any] | None,
                       first: int, count: int) -> list[str | None]:
        """The answers of one request for `count` choices (fewer when the endpoint ignores ``n``);
        None for a choice cut at the token limit, filtered or refused."""
        params = self._llm.role(role)
        request: dict[str, Any] = {"model": params.model, "messages": messages, **role_parameters(params), "n": count}
        if response_format is not None:
            request["response_format"] = response_format
        if first:
            request["seed"] = first
        _, response = await self._complete(role, request, first)
        texts: list[str | None] = []
        for choice in (response.get("choices") or [])[:count]:
            message = choice.get("message") if isinstance(choice, dict) else None
            if (not isinstance(message, dict) or choice.get("finish_reason") in ("length", "content_filter")
                    or message.get("refusal")):
                texts.append(None)
                continue
            texts.append(split_reasoning(message)[1] or "")
        return texts

    # --- embeddings -------------------------------------------------------------------------

    async def embed(self, texts: Sequence[str], *, model: str) -> list[list[float]]:
        """Embeddings of `texts`: from the endpoint's `/v1/embeddings`, or from a local
        sentence-transformers model when ``llm.embedding_backend`` is ``local``."""
        if self._llm.embedding_source() == "local":
            from toolfactory.llm.local_embeddings import local_embeddings

            self.meter.role("embedding").calls += 1
            return await asyncio.to_thread(local_embeddings, list(texts), self._llm.local_embedding_model)
        request = {"model": model, "input": list(texts), "embeddings": True}
        usage = self.meter.role("embedding")
        key = request_key(request)
        if self._cache is not None and (cached := await self._cache.get(key)) is not None:
            usage.cache_hits += 1
            return [item["embedding"] for item in cached["data"]]
        try:
            body, data = await self._send(
                lambda: self._client.post("/embeddings", body={"model": model, "input": list(texts), "encoding_format": "float"},
                                          cast_to=bytes),
                usage,
            )
        except openai.APIError as exc:
            usage.failures[_reason(exc)] += 1
            refused = isinstance(exc, openai.APIStatusError) and not _is_transient(exc)
            if refused:
                self.refusals.refused("embedding", model, request, exc)  # type: ignore[arg-type]
            message = _connection_message(exc) if isinstance(exc, openai.APIConnectionError) else str(exc)
            raise LLMFailure(_reason(exc), message, transient=_is_transient(exc),
                             detail=endpoint_message(exc) if refused else None) from None  # type: ignore[arg-type]
        usage.calls += 1
        if self._cache is not None:
            self._cache.put(key, body)
        return [item["embedding"] for item in data["data"]]
