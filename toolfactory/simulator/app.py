"""The HTTP face of the simulator: OpenAI-compatible routes plus test-only admin routes.

A plain Starlette app (no request models: the raw JSON body is what gets hashed, so nothing
may be normalised away before hashing). Latency and hangs are `asyncio.sleep`, so one process
serves many slow requests at once. Admin routes live under /simulator, outside /v1, so they can
never be mistaken for OpenAI API calls.

Per request: parse -> hash -> count the attempt -> build the answer (or a 400) -> sleep the
added latency -> maybe replace the answer by a transport fault -> respond.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .chat import complete_chat
from .embeddings import create_embeddings
from .errors import SimulatorError, error_body
from .faults import TransportFault, latency_seconds, transport_fault
from .seeding import request_hash, unit_draw
from .settings import SimulatorSettings
from .state import RequestKind, SimulatorState

MODELS = ("sim-small", "sim-large", "sim-embedding")
OWNER = "toolfactory-simulator"  # how it identifies itself in its model list (toolfactory/llm/identity.py)
PID_HEADER = "x-simulator-pid"  # readiness of this process (toolfactory/llm/simulator_process.py waits for it)

Builder = Callable[[dict[str, Any], SimulatorSettings, str], dict[str, Any]]


def _model_card(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": OWNER}


def _error(
    status: int,
    message: str,
    error_type: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(message, error_type, code), status_code=status, headers=headers)


def _seconds_text(seconds: float) -> str:
    """0.2 -> '0.2', 1.0 -> '1' (Retry-After may be fractional; OpenAI's client accepts it)."""
    return f"{seconds:g}"


async def _read_json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise SimulatorError("We could not parse the JSON body of your request.") from exc
    if not isinstance(body, dict):
        raise SimulatorError("The request body must be a JSON object.")
    return body


def answer_digest(body: dict[str, Any], settings: SimulatorSettings, digest: str) -> str:
    """The hash the answer is drawn from. A resample (a request with a `seed`) is answered
    independently with probability `sample_variation`; otherwise it repeats the answer to the
    same request without a seed, as a model sampling at a low temperature often repeats itself."""
    if "seed" not in body or settings.sample_variation >= 1.0:
        return digest
    if unit_draw(digest, "sample_variation") < settings.sample_variation:
        return digest
    return request_hash({k: v for k, v in body.items() if k != "seed"}, settings.seed)


def create_app(settings: SimulatorSettings) -> Starlette:
    """A fresh simulator ASGI app with its own state, starting from `settings`."""
    state = SimulatorState(settings.model_copy())

    async def answer(request: Request, kind: RequestKind, build: Builder) -> Response:
        try:
            body = await _read_json(request)
        except SimulatorError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        current = state.settings
        digest = request_hash(body, current.seed)
        attempt = await state.register(kind, digest)
        try:
            result: dict[str, Any] | SimulatorError = build(body, current, answer_digest(body, current, digest))
        except SimulatorError as exc:
            result = exc
        # The provider's prompt cache: looked up when the request arrives, filled when it is answered.
        cached, blocks = (None, [])
        if kind == "chat" and isinstance(result, dict):
            cached, blocks = state.prefix_cache.lookup(current.profile, body, result["usage"]["prompt_tokens"])
        delay = latency_seconds(current, digest, attempt)
        if delay > 0:
            await asyncio.sleep(delay)
        fault = transport_fault(current, digest, attempt)
        if fault is not None:
            await state.record_fault(fault)
        if fault is TransportFault.RATE_LIMIT:
            wait = current.retry_after_s
            return _error(
                429,
                "Rate limit reached for requests (simulated by toolfactory).",
                "requests",
                "rate_limit_exceeded",
                headers={
                    "retry-after": _seconds_text(wait),
                    "retry-after-ms": str(round(wait * 1000)),
                },
            )
        if fault is TransportFault.SERVER_ERROR:
            return _error(
                500,
                "The server had an error while processing your request (simulated by toolfactory).",
                "server_error",
                "internal_error",
            )
        if fault is TransportFault.TIMEOUT:
            await asyncio.sleep(current.timeout_hang_s)
        if isinstance(result, SimulatorError):
            return JSONResponse(result.body(), status_code=result.status)
        if kind == "chat" and cached is not None:
            state.prefix_cache.store(current.profile, blocks, result["usage"]["prompt_tokens"], cached)
            result["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
        return JSONResponse(result, headers={"x-request-id": "req_" + digest[:24]})

    async def chat_completions(request: Request) -> Response:
        return await answer(request, "chat", complete_chat)

    async def embeddings(request: Request) -> Response:
        return await answer(
            request, "embedding", lambda body, current, _digest: create_embeddings(body, current)
        )

    async def list_models(request: Request) -> Response:
        # The pid header lets a launcher tell its own child from another server on the port.
        return JSONResponse(
            {"object": "list", "data": [_model_card(m) for m in MODELS]},
            headers={PID_HEADER: str(os.getpid())},
        )

    async def get_model(request: Request) -> Response:
        return JSONResponse(_model_card(request.path_params["model"]))

    async def stats(request: Request) -> Response:
        return JSONResponse(state.stats())

    async def get_settings(request: Request) -> Response:
        return JSONResponse(state.settings.model_dump())

    async def update_settings(request: Request) -> Response:
        try:
            changes = await _read_json(request)
            updated = await state.update_settings(changes)
        except SimulatorError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        except ValidationError as exc:
            return _error(400, str(exc), "invalid_request_error", "invalid_settings")
        return JSONResponse(updated.model_dump())

    async def reset(request: Request) -> Response:
        await state.reset()
        return JSONResponse(state.stats())

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal error."
        code = {404: "not_found", 405: "method_not_allowed"}.get(status)
        return _error(
            status, f"{detail}: {request.method} {request.url.path}", "invalid_request_error", code
        )

    routes = [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/simulator/stats", stats, methods=["GET"]),
        Route("/simulator/settings", get_settings, methods=["GET"]),
        Route("/simulator/settings", update_settings, methods=["POST"]),
        Route("/simulator/reset", reset, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    app.state.simulator = state
    return app


def serve(settings: SimulatorSettings, host: str = "127.0.0.1", port: int = 8800) -> None:
    """Run the simulator in the foreground until interrupted (uvicorn, log level warning)."""
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run()
