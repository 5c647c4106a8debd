"""Throughput of the LLM gateway against a bare openai client, on the offline simulator.

    python -m benchmarks.gateway [--requests N] [--concurrency C] [--rounds R] [--out PATH]

For each simulator latency (500 ms, then 50 ms; jitter 0, no faults; one simulator child process
per setting) the same N distinct chat requests are sent, interleaved round by round
(bare, gateway, bare, gateway, ...) because the machine is noisy:

* bare:    ``openai.AsyncOpenAI(max_retries=0)`` plus an ``asyncio.Semaphore(C)``;
* gateway: ``LLMGateway`` with ``max_concurrency=C``, retries on, the request cache ON in a
           fresh empty folder per round (every request is a miss and is written to the cache).

With ``--limit`` (the default) a third client runs in every round, side by side:

* limited: the gateway as above, plus a run-wide rate limit (``llm.rate_limit``) set so high
           that it never binds, its ledger a Ray actor as in a run: what leasing permits costs.
           The actor's own CPU is reported too (it is another process).

With ``--peers`` (the default) and a peer framework installed (``make bench-peers``), it runs
in every round too, on the same simulator; otherwise the reason it does not is printed:

* curator: bespokelabs-curator's ``LLM`` with its OpenAI backend, ``max_concurrent_requests=C``,
           its rate limits set never to bind, in a fresh working folder per round (its request,
           response and dataset files are its cache). It runs in a venv of its own
           (``--peers-python``), in a worker process that times itself: see benchmarks.peers.

Then a cache-hit pass re-runs the gateway over the same requests with a filled cache (the
simulator's request counter proves no request reached the endpoint).

Reported per setting: median requests/second of each, their ratio to the concurrency bound
C / latency, gateway/bare and gateway/curator. Client CPU seconds per request are reported too:
they are a less noise-sensitive view of the gateway's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import io
import json
import math
import os
import pstats
import resource
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import openai

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from benchmarks.peers import DEFAULT_PEERS_PYTHON, CuratorWorker, curator_missing
from toolfactory.config import LLMConfig, StorageConfig, load_config
from toolfactory.llm.cache import RequestCache
from toolfactory.llm.endpoint import Endpoint
from toolfactory.llm.gateway import LLMGateway
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.storage import ObjectStore

ROLE = "user"
MODEL = "sim-small"
# Room for the whole answer: an answer cut at the limit (finish_reason length) is re-asked by
# the gateway with a larger one, which would measure two requests against the bare client's one.
MAX_TOKENS = 256
API_KEY = "sk-bench"
TARGET_BOUND_RATIO = 0.8
TARGET_GATEWAY_RATIO = 0.95
TARGET_CURATOR_RATIO = 1.2
# The bound C / latency is a target only where latency, not the client's CPU, is the limit; the
# ratio to curator only where the client's CPU is.
BOUND_TARGET_MIN_LATENCY_MS = 200.0


# --- workload -------------------------------------------------------------------------------


def llm_config(concurrency: int) -> LLMConfig:
    overrides = [
        f"llm.max_concurrency={concurrency}",
        f"llm.roles.{ROLE}.model={MODEL}",
        f"llm.roles.{ROLE}.max_tokens={MAX_TOKENS}",
        "llm.cache=true",
    ]
    return load_config(None, overrides, environ={}).llm


def workload(n: int, tag: str = "bench") -> list[list[dict[str, Any]]]:
    """N distinct conversations (the index is in the content)."""
    return [
        [{"role": "user", "content": f"[{tag} {i}] Summarise in one line why request {i} matters."}]
        for i in range(n)
    ]


def bare_request(llm: LLMConfig, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Exactly the request body the gateway sends for `messages` (see LLMGateway.chat)."""
    params = llm.roles[ROLE]  # type: ignore[index]
    return {
        "model": params.model,
        "messages": list(messages),
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }


def digest(contents: list[str | None]) -> str:
    return hashlib.sha256("\x00".join(c or "" for c in contents).encode()).hexdigest()[:16]


# --- one round of each kind -----------------------------------------------------------------


def _child_cpu_s(pid: int) -> float | None:
    """utime + stime of a process (the simulator), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _context_switches() -> int:
    """Voluntary + involuntary context switches of this process (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _sim_requests(root_url: str) -> int:
    with urllib.request.urlopen(f"{root_url}/simulator/stats", timeout=5) as response:
        return int(json.loads(response.read())["chat_requests"])


class Meter:
    """Wall time, client CPU time and simulator CPU time of one timed section."""

    def __init__(self, sim_pid: int) -> None:
        self.sim_pid = sim_pid

    def __enter__(self) -> Meter:
        self._ctx0 = _context_switches()
        self._sim0 = _child_cpu_s(self.sim_pid)
        self._cpu0 = time.process_time()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self.cpu_s = time.process_time() - self._cpu0
        self.context_switches = _context_switches() - self._ctx0
        sim1 = _child_cpu_s(self.sim_pid)
        self.sim_cpu_s = None if sim1 is None or self._sim0 is None else sim1 - self._sim0


def _figures(kind: str, n: int, meter: Meter, **extra: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "requests": n,
        "wall_s": round(meter.wall_s, 4),
        "rps": round(n / meter.wall_s, 2),
        "client_cpu_s": round(meter.cpu_s, 3),
        "client_cpu_ms_per_request": round(1000 * meter.cpu_s / n, 3),
        "context_switches_per_request": round(meter.context_switches / n, 2),
        "simulator_cpu_s": None if meter.sim_cpu_s is None else round(meter.sim_cpu_s, 3),
        **extra,
    }


async def bare_round(sim: Any, llm: LLMConfig, convs: list[list[dict[str, Any]]], concurrency: int) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key=API_KEY, max_retries=0, timeout=llm.timeout_s)
    slots = asyncio.Semaphore(concurrency)
    requests = [bare_request(llm, m) for m in convs]

    async def one(request: dict[str, Any]) -> str | None:
        async with slots:
            answer = await client.chat.completions.create(**request)
        return answer.choices[0].message.content

    try:
        with Meter(sim.pid) as meter:
            contents = await asyncio.gather(*(one(r) for r in requests))
    finally:
        await client.close()
    return _figures("bare", len(convs), meter, answers_digest=digest(list(contents)))


async def gateway_round(
    sim: Any, llm: LLMConfig, convs: list[list[dict[str, Any]]], cache_root: Path, ledger: Any = None
) -> dict[str, Any]:
    store = ObjectStore.open(StorageConfig(root=str(cache_root)))
    before = _sim_requests(sim.root_url)
    limit = ledger.ref.connect(llm) if ledger is not None else None
    ledger_cpu0 = ledger.cpu_s() if ledger is not None else None
    leases0 = ledger.leases() if ledger is not None else 0
    async with LLMGateway(Endpoint(sim.base_url, API_KEY), llm, cache=RequestCache(store), limit=limit) as gateway:
        with Meter(sim.pid) as meter:
            messages = await asyncio.gather(*(gateway.chat(ROLE, m) for m in convs))
        totals = gateway.meter.totals()
    endpoint_calls = _sim_requests(sim.root_url) - before
    extra: dict[str, Any] = {}
    if ledger is not None:
        used = ledger.cpu_s() - ledger_cpu0
        # The actor's CPU includes a Ray worker's idle background work, which grows with wall time.
        extra = {"ledger_cpu_s": round(used, 3), "ledger_cpu_ms_per_request": round(1000 * used / len(convs), 3),
                 "leases": ledger.leases() - leases0}
    return _figures(
        "gateway" if ledger is None else "limited",
        len(convs),
        meter,
        answers_digest=digest([m.get("content") for m in messages]),
        llm_calls=totals["calls"],
        cache_hits=totals["cache_hits"],
        retries=totals["retries"],
        endpoint_calls=endpoint_calls,
        **extra,
    )


async def curator_round(sim: Any, worker: CuratorWorker, convs: list[list[dict[str, Any]]], working_dir: Path) -> dict[str, Any]:
    """A round of curator in its worker process, which times itself (its CPU, not this process's)."""
    before, sim0 = _sim_requests(sim.root_url), _child_cpu_s(sim.pid)
    figures = await asyncio.to_thread(worker.run, [m[0]["content"] for m in convs], working_dir)
    sim1 = _child_cpu_s(sim.pid)
    meter = Meter(sim.pid)
    meter.wall_s, meter.cpu_s, meter.context_switches = figures["wall_s"], figures["cpu_s"], figures["context_switches"]
    meter.sim_cpu_s = None if sim0 is None or sim1 is None else sim1 - sim0
    return _figures("curator", len(convs), meter, answers_digest=digest(figures["contents"]),
                    endpoint_calls=_sim_requests(sim.root_url) - before)


def _client_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians every client beside the gateway reports, and its rounds."""
    return {
        "rps_median": round(median([f["rps"] for f in rounds]), 2),
        "cpu_ms_per_request_median": round(median([f["client_cpu_ms_per_request"] for f in rounds]), 3),
        "context_switches_per_request_median": median([f["context_switches_per_request"] for f in rounds]),
        "rounds": rounds,
    }


def start_curator(python: Path, sim: Any, llm: LLMConfig, concurrency: int) -> CuratorWorker:
    params = llm.roles[ROLE]  # type: ignore[index]
    generation = {"temperature": params.temperature, "top_p": params.top_p, "max_tokens": params.max_tokens}
    return CuratorWorker(python, sim.base_url, API_KEY, MODEL, {k: v for k, v in generation.items() if v is not None},
                         concurrency, llm.timeout_s)


# --- the benchmark ------------------------------------------------------------------------


async def warm_up(sim: Any, llm: LLMConfig, concurrency: int, tmp: Path, curator: Any = None) -> None:
    """Imports, lazy client resources and first connections, outside any timed section."""
    convs = workload(min(concurrency, 32), tag="warmup")
    await bare_round(sim, llm, convs, concurrency)
    await gateway_round(sim, llm, convs, tmp / "warmup-cache")
    if curator is not None:
        await curator_round(sim, curator, convs, tmp / "warmup-curator")


class BenchLedger:
    """The run-wide limit's ledger as a run has it: a Ray actor (see toolfactory.llm.limits)."""

    def __init__(self, llm: LLMConfig, name: str) -> None:
        import ray

        from toolfactory.llm.limits import Spend
        from toolfactory.llm.ray_ledger import start_ledger

        self.ref, self.handle = start_ledger(name, llm, Spend())
        self.pid = ray.get(self.handle.__ray_call__.remote(lambda _ledger: os.getpid()))

    def cpu_s(self) -> float:
        return _child_cpu_s(self.pid) or 0.0

    def leases(self) -> int:
        from toolfactory.llm.ray_ledger import ledger_state

        return int(ledger_state(self.handle)["leases"])

    def stop(self) -> None:
        from toolfactory.llm.ray_ledger import stop_ledger

        stop_ledger(self.handle)


async def run_setting(
    latency_ms: float, n: int, concurrency: int, rounds: int, tmp: Path, hit_pass: bool, limit: bool = False,
    peers_python: Path | None = None,
) -> dict[str, Any]:
    llm = llm_config(concurrency)
    # Never binding: what is measured is the cost of leasing, not the limit's waiting.
    limited_llm = load_config(None, [f"llm.max_concurrency={concurrency}", f"llm.roles.{ROLE}.model={MODEL}",
                                     f"llm.roles.{ROLE}.max_tokens={MAX_TOKENS}", "llm.rate_limit.requests_per_minute=1e9"],
                              environ={}).llm
    ledger = BenchLedger(limited_llm, f"bench-{latency_ms:g}") if limit else None
    convs = workload(n)
    bound = concurrency / (latency_ms / 1000.0)
    bare: list[dict[str, Any]] = []
    gw: list[dict[str, Any]] = []
    limited: list[dict[str, Any]] = []
    cur: list[dict[str, Any]] = []
    hits: list[dict[str, Any]] = []
    with start_simulator(SimulatorSettings(latency_ms=latency_ms, latency_jitter_ms=0.0)) as sim:
        curator = start_curator(peers_python, sim, llm, concurrency) if peers_python is not None else None
        await warm_up(sim, llm, concurrency, tmp / f"lat{latency_ms:g}", curator)
        for r in range(rounds):
            bare.append(await bare_round(sim, llm, convs, concurrency))
            _progress(latency_ms, r, bare[-1])
            cache_root = tmp / f"lat{latency_ms:g}" / f"cache-round-{r}"
            gw.append(await gateway_round(sim, llm, convs, cache_root))
            _progress(latency_ms, r, gw[-1])
            if ledger is not None:
                limited.append(await gateway_round(sim, limited_llm, convs, cache_root.with_name(f"limited-{r}"), ledger))
                _progress(latency_ms, r, limited[-1])
            if curator is not None:
                cur.append(await curator_round(sim, curator, convs, cache_root.with_name(f"curator-{r}")))
                _progress(latency_ms, r, cur[-1])
        if hit_pass:
            for r in range(rounds):  # the cache filled by the last gateway round
                figures = await gateway_round(sim, llm, convs, cache_root)
                figures["kind"] = "gateway-cache-hit"
                hits.append(figures)
                _progress(latency_ms, r, figures)
        if curator is not None:
            curator.close()
    if ledger is not None:
        ledger.stop()
    digests = {f["answers_digest"] for f in bare + gw + limited + cur + hits}
    bare_rps = median([f["rps"] for f in bare])
    gw_rps = median([f["rps"] for f in gw])
    result: dict[str, Any] = {
        "latency_ms": latency_ms,
        "jitter_ms": 0.0,
        "concurrency": concurrency,
        "requests": n,
        "rounds": rounds,
        "bound_rps": round(bound, 2),
        "wave_bound_rps": round(n / (math.ceil(n / concurrency) * latency_ms / 1000.0), 2),
        "bare_rps_median": round(bare_rps, 2),
        "gateway_rps_median": round(gw_rps, 2),
        "bare_bound_ratio": round(bare_rps / bound, 4),
        "gateway_bound_ratio": round(gw_rps / bound, 4),
        "gateway_bare_ratio": round(gw_rps / bare_rps, 4),
        # Paired per round (bare r vs gateway r ran back to back): robust to slow drifts in load.
        "gateway_bare_ratio_per_round": [round(g["rps"] / b["rps"], 4) for b, g in zip(bare, gw)],
        "bare_cpu_ms_per_request_median": round(median([f["client_cpu_ms_per_request"] for f in bare]), 3),
        "gateway_cpu_ms_per_request_median": round(median([f["client_cpu_ms_per_request"] for f in gw]), 3),
        "bare_context_switches_per_request_median": median([f["context_switches_per_request"] for f in bare]),
        "gateway_context_switches_per_request_median": median([f["context_switches_per_request"] for f in gw]),
        "identical_answers": len(digests) == 1,
        "bare_rounds": bare,
        "gateway_rounds": gw,
    }
    if limited:
        limited_rps = median([f["rps"] for f in limited])
        result["limited"] = {
            **_client_summary(limited),
            "limited_gateway_ratio": round(limited_rps / gw_rps, 4),
            "limited_bare_ratio": round(limited_rps / bare_rps, 4),
            "ledger_cpu_ms_per_request_median": round(median([f["ledger_cpu_ms_per_request"] for f in limited]), 3),
            "leases_per_round": [f["leases"] for f in limited],
        }
    if cur:
        cur_rps = median([f["rps"] for f in cur])
        result["curator"] = {
            **_client_summary(cur),
            "gateway_curator_ratio": round(gw_rps / cur_rps, 4),
            "gateway_curator_ratio_per_round": [round(g["rps"] / c["rps"], 4) for g, c in zip(gw, cur)],
            "curator_bare_ratio": round(cur_rps / bare_rps, 4),
            "endpoint_calls": [f["endpoint_calls"] for f in cur],
        }
    if hits:
        result["cache_hit"] = {
            "rps_median": round(median([f["rps"] for f in hits]), 2),
            "cache_hits": [f["cache_hits"] for f in hits],
            "llm_calls": [f["llm_calls"] for f in hits],
            "endpoint_calls": [f["endpoint_calls"] for f in hits],
            "cpu_ms_per_request_median": round(median([f["client_cpu_ms_per_request"] for f in hits]), 3),
            "rounds": hits,
        }
    return result


def _progress(latency_ms: float, r: int, f: dict[str, Any]) -> None:
    extra = ""
    if "cache_hits" in f:
        extra = f"  calls={f['llm_calls']} hits={f['cache_hits']} endpoint={f['endpoint_calls']} retries={f['retries']}"
    print(
        f"  latency {latency_ms:>4g} ms  round {r + 1}  {f['kind']:<17} {f['rps']:>8.1f} rps  "
        f"wall {f['wall_s']:6.2f} s  cpu {f['client_cpu_ms_per_request']:6.3f} ms/req  "
        f"ctxsw {f['context_switches_per_request']:5.2f}/req{extra}",
        file=sys.stderr,
        flush=True,
    )


def profile_gateway(latency_ms: float, n: int, concurrency: int, tmp: Path, top: int = 25) -> str:
    """cProfile of one cache-miss gateway round (for finding where the gateway's time goes)."""
    llm = llm_config(concurrency)
    convs = workload(n, tag="profile")
    with start_simulator(SimulatorSettings(latency_ms=latency_ms, latency_jitter_ms=0.0)) as sim:
        asyncio.run(warm_up(sim, llm, concurrency, tmp / "profile"))
        profiler = cProfile.Profile()
        profiler.enable()
        figures = asyncio.run(gateway_round(sim, llm, convs, tmp / "profile" / "cache"))
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    print(f"gateway round under cProfile: {figures['rps']} rps, {figures['wall_s']} s", file=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def report(results: dict[str, Any]) -> str:
    rows = []
    for s in results["settings"]:
        peer = s.get("curator", {})
        rows.append([
            f"{s['latency_ms']:g} ms", s["bound_rps"], s["bare_rps_median"], s["gateway_rps_median"], peer.get("rps_median", "-"),
            s["bare_bound_ratio"], s["gateway_bound_ratio"], s["gateway_bare_ratio"], peer.get("gateway_curator_ratio", "-"),
            s["bare_cpu_ms_per_request_median"], s["gateway_cpu_ms_per_request_median"], peer.get("cpu_ms_per_request_median", "-"),
            s["bare_context_switches_per_request_median"], s["gateway_context_switches_per_request_median"],
            peer.get("context_switches_per_request_median", "-"),
        ])
    lines = [
        f"gateway benchmark: {results['params']['requests']} requests, concurrency "
        f"{results['params']['concurrency']}, median of {results['params']['rounds']} interleaved rounds "
        f"({results['machine']['nproc']} CPUs, Python {results['machine']['python']}, openai {results['params']['openai']})",
        "",
        table(
            ["latency", "bound rps", "bare rps", "gw rps", "curator rps", "bare/bound", "gw/bound", "gw/bare", "gw/curator",
             "bare cpu ms/req", "gw cpu ms/req", "curator cpu ms/req", "bare ctxsw/req", "gw ctxsw/req", "curator ctxsw/req"],
            rows,
        ),
    ]
    for s in results["settings"]:
        per_round = f"; gw/curator per round {s['curator']['gateway_curator_ratio_per_round']}" if "curator" in s else ""
        lines.append(
            f"  {s['latency_ms']:g} ms: gw/bare per round {s['gateway_bare_ratio_per_round']}{per_round}; "
            f"identical answers of every client: {s['identical_answers']}"
        )
    for s in results["settings"]:
        lim = s.get("limited")
        if lim:
            lines.append(
                f"  {s['latency_ms']:g} ms, run-wide limit on (never binding, Ray actor ledger) vs off: "
                f"{lim['rps_median']} vs {s['gateway_rps_median']} rps (limited/gw {lim['limited_gateway_ratio']}, "
                f"limited/bare {lim['limited_bare_ratio']}); cpu {lim['cpu_ms_per_request_median']} vs "
                f"{s['gateway_cpu_ms_per_request_median']} ms/req, + ledger actor {lim['ledger_cpu_ms_per_request_median']} ms/req; "
                f"leases per round {lim['leases_per_round']} for {s['requests']} requests"
            )
    if results["params"]["peers"] != "on":
        lines.append(f"  curator not run: {results['params']['peers']}")
    for s in results["settings"]:
        hit = s.get("cache_hit")
        if hit:
            lines.append(
                f"cache-hit pass (same {s['requests']} requests, filled cache): {hit['rps_median']} rps, "
                f"hits {hit['cache_hits']}, gateway calls {hit['llm_calls']}, endpoint calls {hit['endpoint_calls']}, "
                f"{hit['cpu_ms_per_request_median']} cpu ms/req"
            )
    lines.append("")
    verdicts = [
        f"gateway/bound >= {TARGET_BOUND_RATIO} at {s['latency_ms']:g} ms: "
        f"{'PASS' if s['gateway_bound_ratio'] >= TARGET_BOUND_RATIO else 'FAIL'}"
        for s in results["settings"]
        if s["latency_ms"] >= BOUND_TARGET_MIN_LATENCY_MS
    ] + [
        f"gateway/bare >= {TARGET_GATEWAY_RATIO} at {s['latency_ms']:g} ms: "
        f"{'PASS' if s['gateway_bare_ratio'] >= TARGET_GATEWAY_RATIO else 'FAIL'}"
        for s in results["settings"]
    ] + [
        f"gateway/curator >= {TARGET_CURATOR_RATIO} at {s['latency_ms']:g} ms: "
        f"{'PASS' if s['curator']['gateway_curator_ratio'] >= TARGET_CURATOR_RATIO else 'FAIL'}"
        for s in results["settings"]
        if "curator" in s and s["latency_ms"] < BOUND_TARGET_MIN_LATENCY_MS
    ]
    lines.append("targets: " + "; ".join(verdicts))
    for s in results["settings"]:
        lines.append(
            f"  note {s['latency_ms']:g} ms: with {s['requests']} requests in waves of {s['concurrency']} the bound is "
            f"really {s['wave_bound_rps']} rps (ceil(N/C) waves of the latency), not {s['bound_rps']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per round (default 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per client (default 3)")
    parser.add_argument("--latencies", default="500,50", help="simulator latencies in ms (default 500,50)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "gateway.json"), help="JSON results file")
    parser.add_argument("--profile", action="store_true", help="also cProfile one gateway round at the last latency")
    parser.add_argument("--limit", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the gateway with a run-wide rate limit (needs a local Ray; default on)")
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the peer frameworks that are installed (curator; default on)")
    parser.add_argument("--peers-python", type=Path, default=DEFAULT_PEERS_PYTHON,
                        help=f"the Python of the peers' venv (default {DEFAULT_PEERS_PYTHON.relative_to(DEFAULT_PEERS_PYTHON.parents[2])})")
    args = parser.parse_args(argv)
    latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    peers_missing = curator_missing(args.peers_python) if args.peers else "--no-peers"
    if peers_missing:
        print(f"curator not run: {peers_missing}", file=sys.stderr, flush=True)

    load_start = os.getloadavg()
    started = time.perf_counter()
    if args.limit:
        import ray

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory(prefix="toolfactory-bench-gateway-") as tmp:
        settings = []
        for i, latency in enumerate(latencies):
            print(f"latency {latency:g} ms: starting simulator", file=sys.stderr, flush=True)
            settings.append(
                asyncio.run(run_setting(latency, args.requests, args.concurrency, args.rounds, Path(tmp), hit_pass=i == 0,
                                        limit=args.limit, peers_python=None if peers_missing else args.peers_python))
            )
        profile = profile_gateway(latencies[-1], args.requests, args.concurrency, Path(tmp)) if args.profile else None
    if args.limit:
        import ray

        ray.shutdown()
    results: dict[str, Any] = {
        "benchmark": "gateway",
        "machine": machine_info(),
        "loadavg_start": [round(x, 2) for x in load_start],
        "params": {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "rounds": args.rounds,
            "latencies_ms": latencies,
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "cache": "on, fresh empty local folder per gateway round",
            "retries": "on (llm.max_retries default)",
            "limit": "run-wide llm.rate_limit of 1e9 requests/min (never binding), ledger a Ray actor" if args.limit else "off",
            "peers": peers_missing or "on",
            "peers_python": str(args.peers_python),
            "openai": openai.__version__,
        },
        "targets": {"gateway_bound_ratio": TARGET_BOUND_RATIO, "gateway_bare_ratio": TARGET_GATEWAY_RATIO,
                    "gateway_curator_ratio": TARGET_CURATOR_RATIO},
        "settings": settings,
        "total_s": round(time.perf_counter() - started, 1),
    }
    if profile:
        results["profile"] = profile
    print(report(results))
    if profile:
        print("\n" + profile)
    out = write_json(args.out, results)
    print(f"\nresults written to {out} (total {results['total_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
