"""Where the gateway's extra cost goes (a diagnostic companion of benchmarks.gateway).

    python -m benchmarks.gateway_breakdown [--requests N] [--latency-ms L] [--rounds R] [--out PATH]

1. Micro-benchmarks, one at a time on the main thread, of what the gateway adds per request
   to a bare client call: the request key, tenacity's retry loop, ``model_dump``, a hop through
   ``asyncio.to_thread``, and the cache write/read on the default temp folder and on tmpfs.
2. Interleaved rounds against the simulator (default 50 ms, where the client's CPU is the limit):
   bare client / gateway with the cache off / cache on in the default temp folder / cache on
   in /dev/shm (tmpfs) / cache on in tmpfs with the same file I/O done inline on the event loop
   instead of through ``asyncio.to_thread`` (a RequestCache subclass defined here, not a change
   to toolfactory), so the cost of the file writes is separated from the cost of the thread hops.

cProfile only sees the event-loop thread, and the cache's file I/O runs in worker threads via
``asyncio.to_thread``: this is why the cost is measured by difference here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from benchmarks.gateway import (
    API_KEY,
    ROLE,
    Meter,
    _figures,
    _sim_requests,
    bare_request,
    bare_round,
    digest,
    llm_config,
    workload,
)
from toolfactory.config import LLMConfig, StorageConfig
from toolfactory.llm.cache import RequestCache, request_key
from toolfactory.llm.endpoint import Endpoint
from toolfactory.llm.gateway import LLMGateway
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.storage import ObjectStore

SHM = Path("/dev/shm")


def _micro(label: str, fn: Callable[[], Any], n: int) -> dict[str, Any]:
    cpu0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"what": label, "us_wall_per_op": round(1e6 * wall / n, 1), "us_cpu_per_op": round(1e6 * cpu / n, 1)}


def micro_benchmarks(n: int, tmp: Path) -> list[dict[str, Any]]:
    from openai.types.chat import ChatCompletion
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

    llm = llm_config(64)
    requests = [bare_request(llm, m) for m in workload(n)]
    keys = [request_key({**r, "sample": 0}) for r in requests]
    answer = {
        "id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "sim-small",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "word " * 16}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 16, "total_tokens": 28},
    }
    completion = ChatCompletion.model_validate(answer)
    payload = json.dumps(answer).encode()
    out = [
        _micro("request_key (canonical JSON + sha256)", lambda: [request_key({**r, "sample": 0}) for r in requests], n),
        _micro("ChatCompletion.model_dump(mode=json)", lambda: [completion.model_dump(mode="json", exclude_unset=True) for _ in range(n)], n),
    ]

    async def tenacity_loop() -> None:
        for _ in range(n):
            async for attempt in AsyncRetrying(stop=stop_after_attempt(5), retry=retry_if_exception(lambda e: True), reraise=True):
                with attempt:
                    pass

    async def thread_hops() -> None:
        await asyncio.gather(*(asyncio.to_thread(lambda: None) for _ in range(n)))

    out.append(_micro("tenacity AsyncRetrying, one attempt", lambda: asyncio.run(tenacity_loop()), n))
    out.append(_micro("asyncio.to_thread(noop), n gathered", lambda: asyncio.run(thread_hops()), n))
    for where in (tmp, SHM):
        if not where.is_dir():
            continue
        root = Path(tempfile.mkdtemp(dir=where, prefix="tf-bench-"))
        try:
            store = ObjectStore.open(StorageConfig(root=str(root)))
            cache = RequestCache(store)
            paths = [cache._path(k) for k in keys]  # noqa: SLF001 - the cache's own layout
            label = f"[{_fs_type(where)} {where}]"
            out.append(_micro(f"ObjectStore.read_bytes_or_none miss {label}", lambda: [store.read_bytes_or_none(p) for p in paths], n))
            out.append(_micro(f"ObjectStore.write_bytes (cache put) {label}", lambda: [store.write_bytes(p, payload) for p in paths], n))
            out.append(_micro(f"  of which fs.create_dir(recursive) {label}", lambda: [store.fs.create_dir(store._full(p).rsplit('/', 1)[0], recursive=True) for p in paths], n))  # noqa: SLF001

            def plain_files(base: Path = root / "plain") -> None:
                for k in keys:
                    folder = base / k[:2]
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / f"{k}.tmp").write_bytes(payload)
                    os.replace(folder / f"{k}.tmp", folder / f"{k}.json")

            out.append(_micro(f"  plain open/write/rename, for reference {label}", plain_files, n))
            out.append(_micro(f"ObjectStore.read_bytes_or_none hit {label}", lambda: [store.read_bytes_or_none(p) for p in paths], n))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


def _fs_type(path: Path) -> str:
    best, kind = "", "?"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    except OSError:
        pass
    return kind


class InlineIOCache(RequestCache):
    """The gateway's RequestCache with its (local, microsecond-scale) file I/O done inline."""

    async def get(self, key: str) -> dict[str, Any] | None:
        data = self._store.read_bytes_or_none(self._path(key))
        return None if data is None else json.loads(data)

    async def put(self, key: str, response: dict[str, Any]) -> None:
        self._store.write_bytes(self._path(key), json.dumps(response, ensure_ascii=False).encode())


async def gateway_variant(
    sim: Any, llm: LLMConfig, convs: list, cache_root: Path | None, kind: str, inline: bool = False
) -> dict[str, Any]:
    cache_class = InlineIOCache if inline else RequestCache
    cache = None if cache_root is None else cache_class(ObjectStore.open(StorageConfig(root=str(cache_root))))
    before = _sim_requests(sim.root_url)
    async with LLMGateway(Endpoint(sim.base_url, API_KEY), llm, cache=cache) as gateway:
        with Meter(sim.pid) as meter:
            messages = await asyncio.gather(*(gateway.chat(ROLE, m) for m in convs))
        totals = gateway.meter.totals()
    return _figures(kind, len(convs), meter, answers_digest=digest([m.get("content") for m in messages]),
                    llm_calls=totals["calls"], cache_hits=totals["cache_hits"],
                    endpoint_calls=_sim_requests(sim.root_url) - before)


async def interleaved(latency_ms: float, n: int, concurrency: int, rounds: int, tmp: Path) -> dict[str, list[dict[str, Any]]]:
    llm = llm_config(concurrency)
    convs = workload(n)
    kinds = ["bare", "gateway cache off", f"gateway cache {_fs_type(tmp)}"]
    if SHM.is_dir():
        kinds += ["gateway cache tmpfs", "gateway cache tmpfs inline I/O"]
    figures: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    with start_simulator(SimulatorSettings(latency_ms=latency_ms, latency_jitter_ms=0.0)) as sim:
        await bare_round(sim, llm, workload(32, "warmup"), concurrency)
        await gateway_variant(sim, llm, workload(32, "warmup"), None, "warmup")
        for r in range(rounds):
            for kind in kinds:
                if kind == "bare":
                    f = await bare_round(sim, llm, convs, concurrency)
                elif kind == "gateway cache off":
                    f = await gateway_variant(sim, llm, convs, None, kind)
                else:
                    base = SHM if "tmpfs" in kind else tmp
                    root = Path(tempfile.mkdtemp(dir=base, prefix="tf-bench-cache-"))
                    try:
                        f = await gateway_variant(sim, llm, convs, root, kind, inline="inline" in kind)
                    finally:
                        shutil.rmtree(root, ignore_errors=True)
                f["kind"] = kind
                figures[kind].append(f)
                print(f"  round {r + 1} {kind:<31} {f['rps']:8.1f} rps  cpu {f['client_cpu_ms_per_request']:.3f} ms/req  "
                      f"ctxsw {f['context_switches_per_request']:.2f}/req",
                      file=sys.stderr, flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway_breakdown", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--out", default=str(RESULTS_DIR / "gateway_breakdown.json"))
    args = parser.parse_args(argv)

    tmp = Path(tempfile.gettempdir())
    micro = micro_benchmarks(args.requests, tmp)
    print(table(["per request", "us wall", "us cpu"], [[m["what"], m["us_wall_per_op"], m["us_cpu_per_op"]] for m in micro]))
    print()
    figures = asyncio.run(interleaved(args.latency_ms, args.requests, args.concurrency, args.rounds, tmp))
    bare_rps = median([f["rps"] for f in figures["bare"]])
    rows = []
    summary = {}
    for kind, fs in figures.items():
        rps = median([f["rps"] for f in fs])
        cpu = median([f["client_cpu_ms_per_request"] for f in fs])
        ctxsw = median([f["context_switches_per_request"] for f in fs])
        summary[kind] = {"rps_median": round(rps, 2), "ratio_to_bare": round(rps / bare_rps, 4),
                         "client_cpu_ms_per_request_median": cpu, "context_switches_per_request_median": ctxsw}
        rows.append([kind, rps, rps / bare_rps, cpu, ctxsw])
    print(f"{args.requests} requests, concurrency {args.concurrency}, simulator latency {args.latency_ms:g} ms, "
          f"median of {args.rounds} interleaved rounds")
    print(table(["client", "rps", "ratio to bare", "client cpu ms/req", "ctxsw/req"], rows))
    out = write_json(args.out, {
        "benchmark": "gateway_breakdown",
        "machine": machine_info(),
        "params": vars(args),
        "micro_benchmarks": micro,
        "summary": summary,
        "rounds": figures,
    })
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
