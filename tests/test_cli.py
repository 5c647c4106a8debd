"""The command line as a user runs it: in a subprocess, or through its entry point in this process
(`toolfactory_here`) where a whole run is what it says and returns."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from conftest import http, small_run_overrides
from toolfactory.simulator import SimulatorSettings, start_simulator

TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


def sets(overrides: list[str]) -> list[str]:
    return [arg for override in overrides for arg in ("--set", override)]


@pytest.mark.fault_matrix
@pytest.mark.e2e
def test_a_run_with_failed_shards_exits_1_and_says_how_to_rerun(toolfactory_here: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    # Half the requests fail: the run's preflight retries past them, its shards (no retries) do not.
    with start_simulator(SimulatorSettings(rate_500=0.5)) as sim:
        overrides = small_run_overrides(tmp_path / "data", **{
            "llm.provider": "openai-compatible", "llm.base_url": sim.base_url,
            "llm.max_retries": 0, "orchestration.task_retries": 0, "tools.max_tools": 4,
        })
        result = toolfactory_here("run", *sets(overrides))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    [run_line] = [line for line in result.stdout.splitlines() if line.startswith("run ") and line.endswith(": failed")]
    run_id = run_line.split()[1].rstrip(":")
    assert f"toolfactory rerun {run_id}" in result.stderr
    assert "tasks shard 0 failed" in result.stdout and "llm_server_error" in result.stdout
    assert "dialogues shard 0 blocked" in result.stdout


def test_simulator_serve_answers_on_the_given_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([TOOLFACTORY, "simulator", "serve", "--port", str(port), "--latency-ms", "5"])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                models = http.get(f"http://127.0.0.1:{port}/v1/models").json()
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert models["object"] == "list" and models["data"]
        settings = http.get(f"http://127.0.0.1:{port}/simulator/settings").json()
        assert settings["latency_ms"] == 5
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.fault_matrix
@pytest.mark.e2e
def test_a_missing_tool_file_is_one_clear_error(prefect_api: str, tmp_path: Path) -> None:
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    files = '[{"path": "%s", "format": "toolbench"}]' % (tmp_path / "nowhere.json")
    result = subprocess.run(
        [TOOLFACTORY, "run", "--set", f"storage.root={tmp_path / 'data'}", "--set", f"tools.files={files}"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: tools.files: no such file '{tmp_path / 'nowhere.json'}'"
    assert not list((tmp_path / "data").glob("runs/*/tools/part-*"))


def test_verify_command_reports_on_a_real_dataset(tmp_path: Path, shared_data: Path) -> None:
    result = subprocess.run(
        [TOOLFACTORY, "verify", str(shared_data / "toolalpaca/eval_simulated.json"), "--format", "toolalpaca", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "r/report.json").read_text())
    assert report["records"] == 100 and report["accepted"] + report["rejected"] == report["parsed"]
    assert f"{report['accepted']} accepted" in result.stdout and (tmp_path / "r/report.md").exists()


# What `toolfactory verify` must not load: the LLM client and gateway, the orchestrators, the
# curation libraries, pyarrow (a JSONL file) and the OpenAPI validator (seconds of start-up).
HEAVY = ("openai", "toolfactory.llm.gateway", "prefect", "ray", "datasketch", "scipy", "pyarrow", "openapi_spec_validator", "fastapi")


def test_verify_without_a_judge_imports_no_llm_client_orchestrator_or_curation_library(tmp_path: Path) -> None:
    data = tmp_path / "x.jsonl"
    data.write_text(json.dumps({"query": "Weather in Lyon?", "tools": json.dumps([{"name": "weather", "description": "Weather.",
                                "parameters": {"city": {"type": "str"}}}]), "answers": json.dumps([{"name": "weather", "arguments": {"city": "Lyon"}}])}) + "\n")
    script = (f"import sys, json\nfrom toolfactory.cli import app\ntry:\n    app(['verify', {str(data)!r}, '-f', 'xlam', '-o', {str(tmp_path / 'r')!r}])\n"
              f"except SystemExit as exc:\n    assert not exc.code, exc.code\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1], check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []
    assert json.loads((tmp_path / "r/report.json").read_text())["accepted"] == 1


def test_the_stage_names_are_the_stages_in_run_order() -> None:
    from toolfactory.stages import STAGE_NAMES, STAGES, stage_named

    assert STAGE_NAMES == tuple(stage.name for stage in STAGES)
    assert stage_named("verify") is STAGES[STAGE_NAMES.index("verify")]


@pytest.mark.e2e
def test_eval_command_judges_toolbench_answers_through_the_simulator(tmp_path: Path, shared_data: Path) -> None:
    answers = shared_data / "toolbench/answer/G1_answer"
    result = subprocess.run(
        [TOOLFACTORY, "eval", str(answers), "--format", "toolbench", "--against", str(answers), "--votes", "4",
         "--out", str(tmp_path / "e"), "--set", f"storage.root={tmp_path / 'data'}"],
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "e/eval.json").read_text())
    assert report["pass"]["paths"] == 4 and report["format_errors"] == 1  # one answer file has no train_messages
    assert all(len(p["votes"]) == 4 and p["finish"] == "give_answer" for p in report["paths"])
    # Each path against itself: two passing or two failing copies tie; an unsure one is not compared (A.5).
    unsure = sum(p["label"] == "unsure" for p in report["paths"])
    assert report["win"]["not_compared"] == unsure and report["win"]["pairs"] == report["win"]["tie"] == 4 - unsure


def _one_message(result: subprocess.CompletedProcess[str]) -> str:
    """Bad input is one `error:` line on stderr, never a traceback."""
    assert "Traceback" not in result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.fault_matrix
def test_stats_on_a_root_with_no_run_is_one_message(tmp_path: Path) -> None:
    for args in (["stats"], ["stats", "some-run"]):
        result = subprocess.run([TOOLFACTORY, *args, "--set", f"storage.root={tmp_path}"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2
        assert str(tmp_path / "stats.duckdb") in _one_message(result)


@pytest.mark.fault_matrix
def test_rerun_of_an_unknown_run_is_one_message_before_prefect_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    result = subprocess.run([TOOLFACTORY, "rerun", "no-such-run", "--set", f"storage.root={tmp_path}"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "no run 'no-such-run'" in _one_message(result)
    assert "prefect" not in result.stdout.lower()  # no temporary server was started


@pytest.mark.fault_matrix
def test_a_tools_file_that_is_not_json_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text("{ not json")
    files = json.dumps([{"path": str(tools), "format": "openai"}])
    result = subprocess.run([TOOLFACTORY, "run", "--set", f"storage.root={tmp_path / 'data'}", "--set", f"tools.files={files}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"{tools} is not a openai file" in _one_message(result)
    assert not (tmp_path / "data" / "runs").exists()


@pytest.mark.fault_matrix
def test_an_openapi_reference_to_nowhere_rejects_the_tool_with_a_reason(tmp_path: Path) -> None:
    document = tmp_path / "pets.yaml"
    document.write_text(
        "openapi: 3.0.0\ninfo: {title: Pets, version: '1.0', description: A pet store.}\n"
        "paths:\n  /pets:\n    get:\n      operationId: listPets\n      summary: List pets\n"
        "      parameters: [{$ref: '#/components/parameters/Missing'}]\n      responses: {'200': {description: ok}}\n"
    )
    catalog = tmp_path / "catalog.json"
    result = subprocess.run([TOOLFACTORY, "tools", "import", str(document), "--format", "openapi", "--out", str(catalog)],
                            capture_output=True, text=True, timeout=120)
    # Nothing to import is bad input: one line naming the reference, and no empty catalog.
    assert result.returncode == 2 and not catalog.exists()
    assert "0 tools (0 functions) imported, 1 rejected" in result.stdout
    assert "tool_openapi_invalid: no operation left: GET /pets: unresolvable reference '#/components/parameters/Missing'" in result.stdout
    assert _one_message(result) == (f"error: {document}: no tool imported: no operation left: "
                                    "GET /pets: unresolvable reference '#/components/parameters/Missing'")


@pytest.mark.fault_matrix
def test_an_unwritable_output_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "find_books", "description": "Find books by title.",
                                  "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}}]))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [TOOLFACTORY, "tools", "import", str(tools), "--format", "openai", "--out", str(blocker / "catalog.json")]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "NotADirectoryError" in _one_message(result)
    debug = subprocess.run([*args, "--debug"], capture_output=True, text=True, timeout=120)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


@pytest.mark.fault_matrix
def test_rerun_refuses_a_setting_that_changes_what_is_generated(tmp_path: Path) -> None:
    result = subprocess.run([TOOLFACTORY, "rerun", "some-run", "--set", f"storage.root={tmp_path}", "--set", "tasks.instructions_per_tool=9"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "rerun --set tasks.instructions_per_tool" in _one_message(result)


@pytest.mark.fault_matrix
def test_verify_exits_2_with_one_message_for_a_file_of_another_format(tmp_path: Path) -> None:
    path = tmp_path / "tooleval.json"
    path.write_text('{"q1": {"query": "hi", "available_tools": [], "answer": {}}}\n')
    result = subprocess.run([TOOLFACTORY, "verify", str(path), "--format", "xlam", "--out", str(tmp_path / "r")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "is it another format?" in result.stderr and "Traceback" not in result.stderr


def test_eval_with_fewer_than_four_votes_is_one_message(tmp_path: Path) -> None:
    paths = tmp_path / "paths.jsonl"
    paths.write_text("")
    result = subprocess.run([TOOLFACTORY, "eval", str(paths), "--format", "openai", "--votes", "3",
                             "--set", f"storage.root={tmp_path / 'data'}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--votes must be at least 4" in _one_message(result)


@pytest.mark.fault_matrix
def test_a_storage_root_that_is_a_file_is_one_message_before_prefect_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("")
    with socket.socket() as probe:  # a Prefect API nobody serves: reaching it would be another error
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/api"
    env = {**os.environ, "PREFECT_API_URL": closed}
    for args in (["run"], ["rerun", "some-run"]):
        result = subprocess.run([TOOLFACTORY, *args, "--set", f"storage.root={blocker}"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert _one_message(result) == f"error: storage.root: {blocker} is a file, not a folder"


@pytest.mark.fault_matrix
@pytest.mark.e2e
def test_a_disk_that_fills_during_a_run_is_one_line_with_the_rerun_command(prefect_api: str, small_tmpfs: Any) -> None:
    root = small_tmpfs(size="2m") / "data"  # room for the start of a run, not for its end
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    result = subprocess.run([TOOLFACTORY, "run", *sets(small_run_overrides(root))], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    [run_line] = [line for line in result.stdout.splitlines() if line.startswith("run ")]
    run_id = run_line.split()[1].rstrip(":")
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: run {run_id} stopped: no space left on the disk of {root}")
    assert last.endswith(f"finish the run with: toolfactory rerun {run_id} --set storage.root={root}")


@pytest.mark.parametrize("stage", ["tools", "tasks", "dialogues", "verify"])
def test_a_worker_running_a_shard_loads_no_other_stage_nor_the_simulator_server_nor_the_mcp_sdk(stage: str) -> None:
    # A Ray worker imports the shard task, then the stage of its shard: the MCP SDK (executable
    # sources), the curation libraries (later stages) and the simulator's server are seconds of
    # imports per worker that a shard of a run without MCP sources never uses.
    unused = ("mcp", "datasketch", "scipy", "fastapi", "uvicorn")
    script = (f"import sys, json\nimport tasks.shard\nfrom toolfactory.stages import stage_named\nstage_named({stage!r})\n"
              f"print(json.dumps(sorted(m for m in {unused!r} if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1], check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []
