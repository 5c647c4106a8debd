"""API filtering by a probe call before instructions are written (ToolLLM A.1): the tasks stage
through the real gateway and the simulator over HTTP, and the real HTTP executor against a real
local HTTP server for the APIs that fail, time out, answer slowly or answer nothing useful."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Function, Task, Tool
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.tasks.api_filter import useless, verdict
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.storage import ObjectStore

STOP = threading.Event()
PAGES = {
    "/v1/pets": (200, "application/json", json.dumps([{"name": "Rex", "species": "dog"}])),
    "/v1/page": (200, "text/html", "<!DOCTYPE html><html><body>Welcome</body></html>"),
    "/v1/broken": (500, "application/json", json.dumps({"message": "internal error"})),
    "/v1/nothing": (200, "application/json", "[]"),
    "/v1/unsubscribed": (200, "application/json", json.dumps({"error": "You are not subscribed to this API."})),
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.server.seen.append(path)  # type: ignore[attr-defined]
        if path == "/v1/slow":
            STOP.wait(12)
        elif path == "/v1/laggy":
            STOP.wait(4)
        status, kind, body = PAGES.get(path, (200, "application/json", json.dumps({"ok": True})))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    STOP.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    STOP.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def api(name: str, path: str) -> Function:
    return Function(
        name=name, description=f"The {name.replace('_', ' ')} of a pet shop.", method="GET", path=path,
        parameters={"type": "object", "properties": {"species": {"type": "string", "description": "A species."}}},
        returns={"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
    )


# At most 5 APIs per tool, so that an I1 set offers every one of them.
SHOP = {"list_pets": "/pets", "shop_page": "/page", "pet_stock": "/broken", "pet_prices": "/unsubscribed",
        "pet_census": "/slow"}
LAB = {"pet_offers": "/nothing", "pet_news": "/laggy", "lab_results": "/results"}


def pool(base: str) -> list[Tool]:
    shop = Tool(name="Pet Shop", description="A pet shop's API.", category="Pets", link=base,
                functions=[api(name, path) for name, path in SHOP.items()])
    lab = Tool(name="Pet Lab", description="A veterinary lab's API.", category="Pets", link=base,
               functions=[api(name, path) for name, path in LAB.items()])
    simulated = Tool(name="Pet Care", description="Care advice for pets.", category="Pets", link="https://care.example.com/v2",
                     functions=[api("care_tips", "/tips"), api("vet_clinics", "/clinics")])
    return [shop, lab, simulated]


def tasks_of(sim: Any, tools: list[Tool], root: Path, *overrides: str) -> StageOutput:
    config = load_config(None, [f"storage.root={root}", "tasks.recipes={toolllm: 1}", "tasks.scenarios={single_tool: 1}",
                                "tasks.instructions_per_tool=1", *overrides], environ={})
    spec = ShardSpec("tasks", 0, (), {"part": 0, "parts": 1})

    async def go() -> StageOutput:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway, store=ObjectStore.open(config.storage))
            return await TasksStage().run(spec, [t.model_dump() for t in tools], ctx)

    return asyncio.run(go())


def test_useless_bodies_are_named_and_useful_ones_kept() -> None:
    assert useless([]) == useless({}) == useless("  ") == useless(None) == "api_probe_empty"
    assert useless("<html><head><title>Error</title></head></html>") == "api_probe_html"
    assert useless({"message": "You are not subscribed.", "error": True}) == "api_probe_error_message"
    assert useless({"errors": ["quota exceeded"], "status": 429}) == "api_probe_error_message"
    assert useless({"error": None, "results": [1]}) is None  # an error key among data is not an error report
    assert useless({"message": "Hello, Ada"}) is None and useless("plain words") is None and useless([0]) is None


def test_verdict_reads_status_latency_and_body() -> None:
    def judge(body: dict[str, Any], elapsed: float = 0.1, real: bool = True) -> str | None:
        return verdict(body, elapsed, real=real, timeout_s=2.0, max_latency_s=1.0)

    assert judge({"status_code": 0, "error": "x"}, elapsed=2.0) == "api_probe_timeout"
    assert judge({"status_code": 0, "error": "x"}) == "api_probe_unreachable"
    assert judge({"status_code": 404, "error": "x"}) == "api_probe_error"
    assert judge({"status_code": 400, "error": "x"}, real=False) == "api_probe_error"
    assert judge({"status_code": 200, "response": [1]}, elapsed=1.5) == "api_probe_slow"
    assert judge({"status_code": 200, "response": [1]}, elapsed=9.0, real=False) is None  # an LLM's latency is not the API's
    assert judge({"status_code": 200, "response": "<html></html>"}) == "api_probe_html"


def test_toolllm_tool_sets_keep_only_the_apis_that_pass_their_probe(sim: Any, server: ThreadingHTTPServer, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.seen.clear()  # type: ignore[attr-defined]
    out = tasks_of(sim, pool(base), tmp_path, f"dialogues.http.allowlist=[{base}]", "dialogues.http.allow_private=true",
                   "dialogues.http.timeout_s=6", "tasks.api_filter.max_latency_s=2.5")
    tasks = [t for t in out.records if isinstance(t, Task)]
    offered = {t.tools[0].name: {fn.name for fn in t.tools[0].functions} for t in tasks}
    # Latencies are wide apart: this machine's loopback calls can take a second under load.
    assert offered == {"Pet Shop": {"list_pets"}, "Pet Lab": {"lab_results"}, "Pet Care": {"care_tips", "vet_clinics"}}
    assert all(set(t.relevant_functions) <= offered[t.tools[0].name] for t in tasks)
    assert dict(out.profile["api_filter"]) == {
        "kept": 4, "api_probe_html": 1, "api_probe_error": 1, "api_probe_error_message": 1, "api_probe_timeout": 1,
        "api_probe_empty": 1, "api_probe_slow": 1,
    }
    # Each real API was probed once, with the arguments the designer model wrote.
    seen = server.seen  # type: ignore[attr-defined]
    assert sorted(seen) == sorted(f"/v1{path}" for path in [*SHOP.values(), *LAB.values()])


def test_a_tool_set_with_no_working_api_is_rejected_and_the_filter_can_be_off(sim: Any, server: ThreadingHTTPServer,
                                                                               tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    broken = Tool(name="Pet Shop", description="A pet shop's API.", category="Pets", link=base,
                  functions=[api("shop_page", "/page"), api("pet_stock", "/broken")])
    settings = (f"dialogues.http.allowlist=[{base}]", "dialogues.http.allow_private=true")
    out = tasks_of(sim, [broken], tmp_path, *settings)
    assert not out.records and out.rejections() == {"task_no_working_api": 1}
    off = tasks_of(sim, [broken], tmp_path / "off", *settings, "tasks.api_filter.enabled=false")
    assert "api_filter" not in off.profile and off.records and not off.rejected
