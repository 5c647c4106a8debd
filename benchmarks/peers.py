"""Peer frameworks that benchmarks.gateway runs beside the gateway, when they are installed.

Only bespokelabs-curator for now, from the optional extra ``bench-peers``. Its pins clash with the
project's (openai<3, jsonschema<4.24), so it lives in a venv of its own, ``.venv-peers``
(``make bench-peers``), and runs there in a worker process that the benchmark starts once per
setting and feeds one round at a time (the project's venv keeps its own openai, so bare and gateway
are measured as users run them). The worker times each round itself: wall, CPU and context
switches of its own process, from just before to just after curator's call.

Curator is run as a user runs it, ``curator.LLM(...)(prompts)`` with its OpenAI backend, and kept
offline by its own switches: no telemetry, litellm's bundled model cost map, tiktoken's
``cl100k_base`` from the copy litellm ships (tiktoken would otherwise download it, and fail), no
progress bar. Its log is kept to warnings (its per-request debug log file too), which if anything
makes it cheaper than by default.

    python -m benchmarks.peers BASE_URL API_KEY MODEL GENERATION_JSON CONCURRENCY TIMEOUT_S

reads ``{"prompts": [...], "working_dir": ...}`` lines on stdin and answers each with one line of
``{"wall_s", "cpu_s", "context_switches", "contents"}``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"

# Set before curator (and litellm, tiktoken, datasets) is imported: they read them at import.
OFFLINE_ENV = {
    "TELEMETRY_ENABLED": "false",  # curator's posthog telemetry
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches its cost map from the network otherwise
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "CURATOR_DISABLE_RICH_DISPLAY": "1",
    "TQDM_DISABLE": "1",
}

_CHECK = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('bespokelabs.curator') and u.find_spec('litellm') else 1)"


def curator_missing(python: Path) -> str | None:
    """Why curator cannot run with `python`, or None."""
    if not python.exists():
        return f"{python} does not exist (make bench-peers installs curator in a venv of its own)"
    if subprocess.run([str(python), "-c", _CHECK], capture_output=True, timeout=60).returncode != 0:
        return f"bespokelabs-curator is not installed for {python} (make bench-peers)"
    return None


class CuratorWorker:
    """Curator in its own venv, one process for all the rounds of one setting."""

    def __init__(self, python: Path, base_url: str, api_key: str, model: str, generation: dict[str, Any],
                 concurrency: int, timeout_s: float) -> None:
        args = [str(python), "-m", "benchmarks.peers", base_url, api_key, model, json.dumps(generation),
                str(concurrency), str(timeout_s)]
        self._process = subprocess.Popen(args, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, prompts: list[str], working_dir: Path) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"prompts": prompts, "working_dir": str(working_dir)}) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the curator worker stopped (exit code {self._process.wait()}); its log is above")
        return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)


def _context_switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def serve(argv: list[str]) -> None:
    base_url, api_key, model, generation, concurrency, timeout_s = argv
    litellm = importlib.util.find_spec("litellm")
    assert litellm is not None and litellm.submodule_search_locations
    tokenizers = Path(next(iter(litellm.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    os.environ.update({**OFFLINE_ENV, "TIKTOKEN_CACHE_DIR": str(tokenizers)})
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever curator prints goes to stderr, not into the replies
    from bespokelabs import curator

    logging.getLogger("curator").setLevel(logging.WARNING)
    llm = curator.LLM(
        model_name=model,
        backend="openai",
        generation_params=json.loads(generation),
        backend_params={
            "base_url": base_url,
            "api_key": api_key,
            "max_concurrent_requests": int(concurrency),
            # Never binding: the concurrency is the limit, as for the other clients.
            "max_requests_per_minute": 10**9,
            "max_tokens_per_minute": 10**12,
            "request_timeout": int(float(timeout_s)),
        },
    )
    for line in sys.stdin:
        order = json.loads(line)
        switches, cpu, started = _context_switches(), time.process_time(), time.perf_counter()
        answers = llm(order["prompts"], working_dir=order["working_dir"])
        wall, cpu, switches = time.perf_counter() - started, time.process_time() - cpu, _context_switches() - switches
        rows = answers.dataset if hasattr(answers, "dataset") else answers
        reply = {"wall_s": wall, "cpu_s": cpu, "context_switches": switches, "contents": [row["response"] for row in rows]}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])
