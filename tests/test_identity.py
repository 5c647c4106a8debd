"""Provenance: what the endpoint says it is, recorded by preflight and carried by the manifest,
the report, the stats and every export, whatever `llm.provider` says."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from toolfactory.config import validate_config
from toolfactory.export import export_run
from toolfactory.llm import Endpoint
from toolfactory.llm.identity import SIMULATED_LABEL, EndpointIdentity, identify
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.preflight.check import check_endpoint

from export.helpers import RUN, corpus, open_store, write_run


def test_the_simulator_identifies_itself_over_http(simulator_url: str) -> None:
    identity = asyncio.run(identify(Endpoint(simulator_url, "EMPTY")))
    assert identity.models["sim-small"] == "toolfactory-simulator" and identity.simulated
    assert identity.label == SIMULATED_LABEL and identity.unlisted is None


def test_the_simulators_signed_answers_identify_it(simulator_url: str) -> None:
    # The simulator is a program of its own: what it sends is what the product recognises.
    import openai

    answer = openai.OpenAI(base_url=simulator_url, api_key="EMPTY").chat.completions.create(
        model="sim-small", messages=[{"role": "user", "content": "Hello"}])
    assert answer.system_fingerprint is not None
    assert EndpointIdentity(simulator_url, served_by={f"{answer.model} ({answer.system_fingerprint})": 1}).simulated


def test_an_endpoint_without_a_model_list_is_identified_by_its_answers() -> None:
    quiet = EndpointIdentity("http://127.0.0.1:9/v1", unlisted="NotFoundError: 404")
    assert not quiet.simulated and quiet.label == "LLM output of an unidentified endpoint at http://127.0.0.1:9/v1"
    answered = quiet.with_answers({"gpt-x (fp_1)": 3, "gpt-y": 5})
    assert answered.label == "LLM output of gpt-y, gpt-x (fp_1) at http://127.0.0.1:9/v1"
    assert EndpointIdentity("", served_by={"m (fp_toolfactory_sim)": 1}).simulated  # signed by the simulator


def test_preflight_records_the_simulator_when_the_config_calls_it_openai_compatible(simulator_url: str, tmp_path: Path) -> None:
    config = validate_config({"llm": {"provider": "openai-compatible", "base_url": simulator_url},
                              "storage": {"root": str(tmp_path)}})
    report = asyncio.run(check_endpoint(config, Endpoint(simulator_url, "EMPTY")))
    assert report.ok and report.identity is not None
    assert any("fp_toolfactory_sim" in who for who in report.identity.served_by)
    manifest = Manifest.create("r1", config, {}, report.record())
    assert manifest.endpoint().simulated and "made by: simulated" in report.table()


def test_a_url_with_credentials_is_recorded_without_them() -> None:
    from toolfactory.llm.identity import public_url

    assert public_url("https://user:secret@llm.example:8443/v1?key=abc#x") == "https://llm.example:8443/v1"


def test_a_rerun_at_another_endpoint_labels_the_data_with_both() -> None:
    first = EndpointIdentity("http://a/v1", {"m1": "org"}, served_by={"m1": 10})
    second = EndpointIdentity("http://b/v1", {"m2": "toolfactory-simulator"}, served_by={"m2 (fp_toolfactory_sim)": 2})
    assert first.covered_by(first) and not second.covered_by(first)
    both = first.merged(second)
    assert both.simulated and second.covered_by(both) and first.covered_by(both)
    assert both.base_url == "http://a/v1, http://b/v1" and both.served_by == {"m1": 10, "m2 (fp_toolfactory_sim)": 2}


def test_every_export_carries_the_label_of_what_the_endpoint_said(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_run(store, corpus(6))
    config = validate_config({"llm": {"provider": "openai-compatible", "base_url": "http://sim:8000/v1"}})
    identity = EndpointIdentity("http://sim:8000/v1", {"sim-small": "toolfactory-simulator"})
    write_manifest(store, Manifest.create(RUN, config, {}, {"identity": identity.to_dict()}))
    for fmt in ("openai", "hf"):
        summary = export_run(store, RUN, fmt, tmp_path / fmt)
        text = (tmp_path / fmt / "PROVENANCE.md").read_text()
        meta = yaml.safe_load(text.split("---")[1])
        assert meta["simulated"] is True and meta["made_by"] == SIMULATED_LABEL == summary["made_by"]
        assert meta["records"] == sum(summary["splits"].values()) and "do not train on them" in text
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "offline LLM simulator" in card.split("## Splits")[0] and f"Made by: {SIMULATED_LABEL}." in card
