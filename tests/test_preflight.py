"""Preflight against the simulator's provider profiles over real HTTP: what each family serves,
the modes chosen for `auto`, the one message naming the field to change, and the worked configs
of the README (configs/*.yaml) against the profile they are written for."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import http
from toolfactory.config import Config, load_config
from toolfactory.llm import Endpoint
from toolfactory.run.manifest import Manifest
from toolfactory.preflight import Preflight, apply_choices, check_endpoint, run_needs
from toolfactory.simulator import SimulatorSettings, start_simulator

REPO = Path(__file__).resolve().parents[1]
TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


@pytest.fixture
def profile(sim: Any) -> Iterator[Any]:
    """Set the simulator's profile for one test; its defaults come back afterwards."""

    def set_profile(name: str) -> None:
        http.post(f"{sim.root_url}/simulator/settings", json={"profile": name}).raise_for_status()

    yield set_profile
    http.post(f"{sim.root_url}/simulator/settings", json=SimulatorSettings().model_dump()).raise_for_status()


def config(*overrides: str, path: Path | None = None, root: Path | None = None) -> Config:
    base = ["llm.cache=false"] if root is None else [f"storage.root={root}"]
    return load_config(path, [*base, "llm.backoff_initial_s=0.01", "llm.max_retries=1", *overrides], environ={})


def check(sim: Any, cfg: Config) -> Preflight:
    return asyncio.run(check_endpoint(cfg, Endpoint(sim.base_url, "sk-preflight")))


def chat_requests(sim: Any) -> int:
    return int(http.get(f"{sim.root_url}/simulator/stats").json()["chat_requests"])


def test_the_openai_profile_serves_every_role_natively(sim: Any, profile: Any) -> None:
    profile("openai")
    cfg = config()
    report = check(sim, cfg)
    assert report.ok, report.problems
    checked = {(p.role, p.capability, p.mode) for p in report.probes}
    for role in run_needs(cfg).roles:
        assert (role, "chat", "") in checked
    assert ("assistant", "tool calling", "native") in checked and ("user", "structured output", "json_schema") in checked
    assert ("embedding", "embeddings", "endpoint") in checked
    assert report.choices["llm.roles.assistant.tool_calling"] == "native"
    assert report.choices["llm.roles.judge.structured_output"] == "json_schema"
    assert report.choices["llm.embedding_backend"] == "endpoint"
    assert all(p.ok for p in report.probes)
    assert "assistant (sim-small)" in report.table() and "ok (chosen)" in report.table()


def test_without_a_tool_parser_auto_chooses_text_calls(sim: Any, profile: Any) -> None:
    profile("vllm-no-tool-parser")
    report = check(sim, config())
    assert report.ok, report.problems
    native = next(p for p in report.probes if p.capability == "tool calling" and p.mode == "native")
    assert native.status == "unsupported" and "--enable-auto-tool-choice" in native.detail  # the server's own words
    text = next(p for p in report.probes if p.capability == "tool calling" and p.mode == "text")
    assert text.ok and text.detail == "called get_weather"
    assert report.choices["llm.roles.assistant.tool_calling"] == "text"


def test_a_plain_text_server_gets_the_schema_in_the_prompt(sim: Any, profile: Any) -> None:
    profile("plain-text")
    report = check(sim, config())
    assert report.ok, report.problems
    assert {report.choices[f"llm.roles.{role}.structured_output"] for role in ("user", "tool", "judge", "designer")} == {"prompt"}
    assert report.choices["llm.roles.assistant.tool_calling"] == "text"


def test_a_mode_the_endpoint_refuses_is_one_message_naming_the_field(sim: Any, profile: Any) -> None:
    profile("vllm-no-tool-parser")
    report = check(sim, config("llm.tool_calling=native"))
    assert report.problems[0].startswith("llm.roles.assistant: the endpoint does not support tool calling as native")
    assert report.problems[0].endswith("set llm.tool_calling: text")
    assert '"auto" tool choice requires --enable-auto-tool-choice' in report.problems[0]
    assert not report.choices.get("llm.roles.assistant.tool_calling")


def test_a_refused_parameter_set_by_hand_names_the_role_setting(sim: Any, profile: Any) -> None:
    profile("reasoning")
    report = check(sim, config("llm.roles.user.max_tokens_parameter=max_tokens"))
    [problem] = report.problems  # the other roles leave it `auto`: chosen, not refused
    assert problem.startswith("llm.roles.user.max_tokens_parameter: the endpoint refused a chat request")
    assert problem.endswith("set llm.roles.user.max_tokens_parameter: max_completion_tokens")
    report = check(sim, config("llm.roles.user.sampling_parameters=as_set"))
    [problem] = report.problems
    assert problem.startswith("llm.roles.user.temperature:") and problem.endswith("set llm.roles.user.temperature: null")
    assert "llm.roles.user.temperature" not in report.choices


def test_a_reasoning_model_gets_the_parameters_it_accepts_chosen(sim: Any, profile: Any) -> None:
    profile("reasoning")
    report = check(sim, config())
    assert report.ok, report.problems
    for role in run_needs(config()).roles:
        assert report.choices[f"llm.roles.{role}.max_tokens_parameter"] == "max_completion_tokens"
        assert report.choices[f"llm.roles.{role}.temperature"] is None  # left out: the endpoint's default
    assert not any(field.endswith(".top_p") for field in report.choices)  # 1.0 is the default it accepts
    assert "llm.roles.user.temperature: null (left out: the endpoint's default applies)" in report.choice_lines()
    assert "chat: max_completion_tokens, no temperature" in report.table()


def test_a_model_refuses_a_parameter_once_per_check(sim: Any, profile: Any) -> None:
    profile("reasoning")
    before = chat_requests(sim)
    report = check(sim, config())
    refused = [(p.role, p.parameter) for p in report.probes if p.capability == "chat" and not p.ok]
    # `max_tokens` once for the model; each temperature once (the user's 0.9, then the others' 0.7).
    assert refused == [("user", "max_tokens"), ("user", "temperature"), ("assistant", "temperature")]
    chats = [p for p in report.probes if p.capability == "chat"]
    shared = [p for p in chats if p.same_as]
    # With temperature left out, the user's, the assistant's, the tool's and the designer's requests are alike.
    assert {(p.role, p.same_as) for p in shared} == {("assistant", "user"), ("designer", "tool")}
    others = len(report.probes) - len(chats) - 1  # structured output and tool calls, and one embeddings request
    assert chat_requests(sim) - before == len(chats) - len(shared) + others


def test_a_refused_top_p_is_left_out_as_well(sim: Any, profile: Any) -> None:
    profile("reasoning")
    report = check(sim, config("llm.roles.judge.top_p=0.9"))
    assert report.ok, report.problems
    assert report.choices["llm.roles.judge.top_p"] is None and report.choices["llm.roles.judge.temperature"] is None
    assert "llm.roles.user.top_p" not in report.choices


def test_the_openai_profile_keeps_the_old_parameters_and_their_cached_answers(sim: Any, profile: Any, tmp_path: Path) -> None:
    profile("openai")
    report = check(sim, config(root=tmp_path))
    assert report.ok, report.problems
    assert {v for k, v in report.choices.items() if k.endswith(".max_tokens_parameter")} == {"max_tokens"}
    assert not any(k.endswith((".temperature", ".top_p")) for k in report.choices)
    sent = chat_requests(sim)
    fixed = [f"llm.roles.{role}.{setting}" for role in run_needs(config()).roles
             for setting in ("max_tokens_parameter=max_tokens", "sampling_parameters=as_set")]
    again = check(sim, config(*fixed, root=tmp_path))
    # The requests the old fixed settings send are the ones `auto` sent: same cache keys.
    assert again.ok and chat_requests(sim) == sent and all(p.cached or p.same_as for p in again.probes)


def test_a_rerun_sends_the_recorded_parameters_without_choosing(sim: Any, profile: Any) -> None:
    profile("reasoning")
    chosen = check(sim, config())
    manifest = Manifest.create("r1", config(), {}, chosen.record())
    restored = Manifest.model_validate(json.loads(manifest.model_dump_json()))
    rerun_config = restored.run_config()
    assert rerun_config.llm.roles["judge"].temperature is None
    assert rerun_config.llm.roles["judge"].max_tokens_field == "max_completion_tokens"
    assert restored.config["llm"]["roles"]["judge"]["temperature"] == 0.7  # the config as given stays as given
    again = asyncio.run(check_endpoint(rerun_config, Endpoint(sim.base_url, "sk-preflight"), choose=False))
    assert again.ok and not again.choices
    assert all(p.ok and not p.mode for p in again.probes if p.capability == "chat")  # one request each, as recorded


def test_an_unknown_embedding_model_names_the_embedding_settings(sim: Any, profile: Any) -> None:
    profile("openai")
    report = check(sim, config('llm.embedding_model=""'))  # the simulator serves any other name
    assert report.problems and report.problems[-1].startswith("llm.embedding_model: the endpoint refused embeddings")
    assert "llm.embedding_backend: local" in report.problems[-1]


def test_preflight_answers_are_cached_like_every_answer(sim: Any, profile: Any, tmp_path: Path) -> None:
    profile("openai")
    first = check(sim, config(root=tmp_path))
    sent = chat_requests(sim)
    again = check(sim, config(root=tmp_path))
    assert first.ok and again.ok and chat_requests(sim) == sent
    assert all(p.cached for p in again.probes)
    # In the first check only a request another role sent before can be: the designer's is the tool's.
    assert {(p.role, p.capability) for p in first.probes if p.cached} <= {("designer", "structured output")}
    assert again.choices == first.choices


def test_choices_replace_auto_settings_only() -> None:
    cfg = config("llm.roles.judge.structured_output=prompt", "llm.embedding_backend=endpoint")
    chosen = apply_choices(cfg, {"llm.roles.assistant.tool_calling": "text", "llm.roles.judge.structured_output": "json_schema",
                                 "llm.roles.user.structured_output": "json_object", "llm.embedding_backend": "local"})
    assert chosen.llm.tool_calling_for("assistant") == "text"
    assert chosen.llm.structured_output_for("user") == "json_object"
    assert chosen.llm.structured_output_for("judge") == "prompt"  # set, not auto: kept
    assert chosen.llm.embedding_backend == "endpoint"  # likewise (a re-run may set it)
    assert chosen.llm.structured_output == "auto" and chosen.llm.roles["tool"].structured_output is None


def test_parameter_choices_replace_auto_settings_only() -> None:
    cfg = config("llm.roles.judge.sampling_parameters=as_set", "llm.roles.tool.max_tokens_parameter=max_tokens")
    chosen = apply_choices(cfg, {f"llm.roles.{role}.{field}": value for role in ("user", "judge", "tool")
                                 for field, value in (("temperature", None), ("max_tokens_parameter", "max_completion_tokens"))})
    assert chosen.llm.roles["user"].temperature is None and chosen.llm.roles["user"].max_tokens_field == "max_completion_tokens"
    assert chosen.llm.roles["judge"].temperature == 0.7  # sent as set
    assert chosen.llm.roles["tool"].max_tokens_field == "max_tokens"  # set, not auto: kept
    assert config().llm.roles["user"].max_tokens_field == "max_tokens"  # unchecked, `auto` sends what it always did


def test_the_manifest_gives_shards_the_recorded_choices() -> None:
    cfg = config()
    manifest = Manifest.create("r1", cfg, {}, {"choices": {"llm.roles.assistant.tool_calling": "text"}})
    restored = Manifest.model_validate(json.loads(manifest.model_dump_json()))
    assert restored.run_config().llm.tool_calling_for("assistant") == "text"
    assert restored.config["llm"]["tool_calling"] == "auto"  # the config as given stays as given


def test_needs_follow_the_config() -> None:
    needs = run_needs(config("verify.judges=[]", "tools.builtin_introductions=false", "tools.synthesis.count=0",
                             "tasks.recipes={toolalpaca: 1}"))
    assert needs.roles == ("user", "assistant", "tool") and needs.structured == ("user", "tool")
    assert run_needs(config()).structured == ("user", "assistant", "tool", "judge", "designer")  # toolace thinks


# -- the README's worked configs -------------------------------------------------------------------


@pytest.mark.parametrize(("name", "served_by"), [("openai", "openai"), ("vllm-tool-parser", "vllm-hermes"),
                                                 ("vllm-no-tool-parser", "vllm-no-tool-parser")])
def test_each_worked_config_passes_against_its_profile(sim: Any, profile: Any, name: str, served_by: str) -> None:
    profile(served_by)
    cfg = config(path=REPO / "configs" / f"{name}.yaml")
    assert cfg.llm.provider == "openai-compatible" and cfg.llm.roles["assistant"].model != "sim-small"
    report = check(sim, cfg)
    assert report.ok, report.problems
    expected = "text" if name == "vllm-no-tool-parser" else "native"
    assert next(p for p in report.probes if p.capability == "tool calling" and p.ok).mode == expected


def test_check_exits_2_with_one_message_when_the_server_has_no_tool_parser(tmp_path: Path) -> None:
    result = subprocess.run(
        [TOOLFACTORY, "check", "--config", str(REPO / "configs" / "vllm-tool-parser.yaml"),
         "--set", "llm.provider=simulator", "--set", "llm.simulator.profile=vllm-no-tool-parser",
         "--set", f"storage.root={tmp_path}"],
        capture_output=True, text=True, timeout=120, env={"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)},
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: llm.roles.assistant: the endpoint does not support tool calling as native")
    assert line.endswith("set llm.tool_calling: text") and "Traceback" not in result.stderr
    assert "assistant (Qwen/Qwen2.5-7B-Instruct)" in result.stdout and "unsupported" in result.stdout


def test_a_closed_port_is_one_message_saying_nothing_answers(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens at once the socket is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = asyncio.run(check_endpoint(config(), Endpoint(f"http://127.0.0.1:{port}/v1", "sk-preflight")))
    [problem] = report.problems
    assert problem.startswith(f"llm.base_url: cannot connect to the endpoint at http://127.0.0.1:{port}/v1: nothing answers")
    assert "llm_connection_error" in problem and "llm_timeout" not in problem and "\n" not in problem
    assert not report.probes  # nothing else is asked of an endpoint that does not answer


def test_a_check_of_an_endpoint_that_went_down_fails_whatever_is_cached(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-preflight"}

    def check_at(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TOOLFACTORY, "check", "--set", "llm.provider=openai-compatible", "--set", f"llm.base_url={url}",
             "--set", f"storage.root={tmp_path / 'data'}"],
            capture_output=True, text=True, timeout=120, env=env)

    with start_simulator(SimulatorSettings()) as down:
        first = check_at(down.base_url)
        assert first.returncode == 0, first.stderr
    again = check_at(down.base_url)  # every capability's answer is in the cache under the same root
    assert again.returncode == 2, again.stdout
    [line] = again.stderr.strip().splitlines()
    assert line.startswith(f"error: llm.base_url: cannot connect to the endpoint at {down.base_url}: nothing answers")
    assert "llm_connection_error" in line and "cached" not in again.stdout and "ok: " not in again.stdout


def test_a_model_the_endpoint_does_not_list_is_asked_not_the_cache(sim: Any, profile: Any, tmp_path: Path) -> None:
    profile("openai")
    unlisted = [f"llm.roles.{role}.model=gpt-unlisted" for role in ("user", "assistant", "tool", "judge", "designer")]
    assert check(sim, config(*unlisted, root=tmp_path)).ok
    sent = chat_requests(sim)
    again = check(sim, config(*unlisted, root=tmp_path))
    assert again.ok and chat_requests(sim) == sent + 1  # one request confirms the model; the rest is cached
    [asked] = [p for p in again.probes if not (p.cached or p.same_as or p.capability == "embeddings")]
    assert asked.capability == "chat" and asked.model == "gpt-unlisted"
    assert again.table().splitlines()[1].startswith("  endpoint: GET /models answered in ")
