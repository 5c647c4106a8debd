"""The request cache: exact answers, old files still read, and a SIGKILLed writer loses only
the requests it had in flight (toolfactory/llm/cache.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from toolfactory.config import LLMConfig, StorageConfig, load_config
from toolfactory.llm import Endpoint, LLMGateway, RequestCache
from toolfactory.llm.cache import request_key
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.storage import ObjectStore

REQUESTS = 400
ANSWER = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lyon, 21 °C"},
                                           "finish_reason": "stop"}]}


def conversation(i: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Request {i}: what is the weather in Lyon on day {i}?"}]


def llm_config() -> LLMConfig:
    overrides = ["llm.max_concurrency=16", "llm.timeout_s=10", "llm.max_retries=0", "llm.cache=true"]
    return load_config(None, overrides, environ={}).llm


# The writer: asks every conversation through a cached gateway and prints each index once its
# answer has come back (the cache has it by then); it is killed long before it is done.
WRITER = """
import asyncio, sys
from tests.test_request_cache import REQUESTS, conversation, llm_config
from toolfactory.config import StorageConfig
from toolfactory.llm import Endpoint, LLMGateway, RequestCache
from toolfactory.storage import ObjectStore

async def main(base_url, root):
    cache = RequestCache(ObjectStore.open(StorageConfig(root=root)))
    async with LLMGateway(Endpoint(base_url, "sk-test"), llm_config(), cache) as gateway:
        async def one(i):
            await gateway.chat("assistant", conversation(i))
            print(i, flush=True)
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings(latency_ms=40.0, latency_jitter_ms=30.0)) as simulator:
        yield simulator


def store(root: Path) -> ObjectStore:
    return ObjectStore.open(StorageConfig(root=str(root)))


async def answers(base_url: str, indices: list[int], cache: RequestCache | None) -> tuple[dict[int, Any], dict[str, Any]]:
    """The gateway's answer to each conversation, and its usage totals."""
    async with LLMGateway(Endpoint(base_url, "sk-test"), llm_config(), cache) as gateway:
        messages = await asyncio.gather(*(gateway.chat("assistant", conversation(i)) for i in indices))
    return dict(zip(indices, messages)), gateway.meter.totals()


def test_a_sigkilled_writer_leaves_only_whole_exact_answers(slow_sim: Any, tmp_path: Path) -> None:
    root = tmp_path / "data"
    repo = Path(__file__).resolve().parent.parent
    writer = subprocess.Popen([sys.executable, "-c", WRITER, slow_sim.base_url, str(root)], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answered: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(answered) < REQUESTS // 4:  # killed with requests in flight and many to come
            line = writer.stdout.readline()  # type: ignore[union-attr]
            assert line, f"the writer stopped: {writer.stderr.read()[-2000:]}"  # type: ignore[union-attr]
            answered.append(int(line))
            assert time.monotonic() < deadline
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    assert writer.returncode == -signal.SIGKILL

    files = [p for p in (root / "llm-cache").rglob("*.json")]
    assert REQUESTS // 4 <= len(files) < REQUESTS
    assert all(isinstance(json.loads(p.read_bytes()), dict) for p in files)  # whole files only

    # Every answer the writer had got back is in the cache: a gateway with no endpoint to reach finds them all.
    unreachable = "http://127.0.0.1:9/v1"
    cached, _ = asyncio.run(answers(unreachable, answered, RequestCache(store(root))))
    reference, _ = asyncio.run(answers(slow_sim.base_url, list(range(REQUESTS)), None))
    assert cached == {i: reference[i] for i in answered}

    # The cache opens and completes: what it holds is exact, and only what it lacks is asked for.
    again, usage = asyncio.run(answers(slow_sim.base_url, list(range(REQUESTS)), RequestCache(store(root))))
    assert again == reference
    assert (usage["cache_hits"], usage["calls"]) == (len(files), REQUESTS - len(files))
    assert len(list((root / "llm-cache").rglob("*.json"))) == REQUESTS
    assert store(root).remove_temporary("llm-cache") <= 1  # the one write the kill may have cut


def test_a_cut_file_is_a_miss_and_is_replaced(slow_sim: Any, tmp_path: Path) -> None:
    reference, _ = asyncio.run(answers(slow_sim.base_url, [0], RequestCache(store(tmp_path))))
    [path] = (tmp_path / "llm-cache").rglob("*.json")
    body = path.read_bytes()
    path.write_bytes(body[: len(body) // 2])  # as a machine crash may leave an unsynced file
    again, usage = asyncio.run(answers(slow_sim.base_url, [0], RequestCache(store(tmp_path))))
    assert again == reference and usage["calls"] == 1
    assert path.read_bytes() == body


def test_the_stored_body_is_the_endpoint_s_as_sent(tmp_path: Path) -> None:
    cache = RequestCache(store(tmp_path))
    body = b'{"id": "x",\n "choices": [{"message": {"role": "assistant", "content": "caf\\u00e9"}}]}'
    cache.put("ab" + "0" * 62, body)
    cache.close()
    assert (tmp_path / "llm-cache" / "ab" / f"ab{'0' * 62}.json").read_bytes() == body
    assert asyncio.run(cache.get("ab" + "0" * 62)) == json.loads(body)
    assert asyncio.run(cache.get("cd" + "0" * 62)) is None


def test_answers_written_by_earlier_versions_are_read(tmp_path: Path) -> None:
    """Earlier versions dumped the parsed answer (``json.dumps(answer, ensure_ascii=False)``)."""
    key = request_key({"model": "m", "messages": [{"role": "user", "content": "hi"}], "sample": 0})
    store(tmp_path).write_bytes(f"llm-cache/{key[:2]}/{key}.json", json.dumps(ANSWER, ensure_ascii=False).encode())
    assert asyncio.run(RequestCache(store(tmp_path)).get(key)) == ANSWER


def test_an_s3_cache_writes_in_the_background_and_reads_back(tmp_path: Path, s3_server: dict[str, str]) -> None:
    s3 = ObjectStore.open(StorageConfig(root=f"s3://{s3_server['bucket']}/{tmp_path.name}", endpoint_url=s3_server["endpoint"]))
    cache = RequestCache(s3)
    body = json.dumps(ANSWER).encode()
    cache.put("ef" + "1" * 62, body)
    asyncio.run(cache.aclose())  # drains the writer
    assert s3.read_bytes(f"llm-cache/ef/ef{'1' * 62}.json") == body
    assert asyncio.run(RequestCache(s3).get("ef" + "1" * 62)) == ANSWER


def test_a_failed_write_fails_close(tmp_path: Path) -> None:
    (tmp_path / "llm-cache").write_text("a file where the folder should be")
    cache = RequestCache(store(tmp_path))
    cache.put("ab" + "0" * 62, b"{}")
    with pytest.raises(OSError):
        cache.close()
    cache.close()  # raised once

