"""deploy/kuberay: the RayCluster manifest and the Prefect Kubernetes job template, checked offline.

The RayCluster is checked against a schema of the KubeRay v1 fields the project relies on (the
operator reads `rayStartParams` as a map of strings, and the head must expose the client port the
flow runs connect to); the job template is registered with a real Prefect server as a Kubernetes
work pool's base job template, which Prefect validates."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml

from conftest import REPO

KUBERAY = REPO / "deploy" / "kuberay"
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
CONTAINERS = {
    "type": "array", "minItems": 1,
    "items": {"type": "object", "required": ["name", "image"],
              "properties": {"name": {"type": "string"}, "image": {"type": "string"}, "ports": {"type": "array"},
                             "envFrom": {"type": "array"}, "resources": {"type": "object"}}},
}
POD_TEMPLATE = {"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object", "required": ["containers"],
                                                                               "properties": {"containers": CONTAINERS}}}}
RAY_CLUSTER = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayCluster"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["rayVersion", "headGroupSpec", "workerGroupSpecs"],
            "properties": {
                "rayVersion": {"type": "string"},
                "headGroupSpec": {"type": "object", "required": ["rayStartParams", "template"],
                                  "properties": {"rayStartParams": STRINGS, "template": POD_TEMPLATE}},
                "workerGroupSpecs": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template"],
                    "properties": {"groupName": {"type": "string"}, "replicas": {"type": "integer", "minimum": 0},
                                   "minReplicas": {"type": "integer", "minimum": 0}, "maxReplicas": {"type": "integer", "minimum": 1},
                                   "rayStartParams": STRINGS, "template": POD_TEMPLATE}}},
            },
        },
    },
}


@pytest.mark.fault_matrix
def test_the_ray_cluster_manifest_fits_kuberay_and_the_image() -> None:
    cluster = yaml.safe_load((KUBERAY / "raycluster.yaml").read_text())
    jsonschema.validate(cluster, RAY_CLUSTER)
    locked = re.search(r"^ray==(\S+)$", (REPO / "deploy" / "requirements.lock").read_text(), re.M)
    assert locked and cluster["spec"]["rayVersion"] == locked.group(1)
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p["containerPort"] for p in head["ports"]} >= {6379, 8265, 10001}
    for group in cluster["spec"]["workerGroupSpecs"]:
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]


def test_flow_runs_reach_the_clusters_head_service() -> None:
    cluster = yaml.safe_load((KUBERAY / "raycluster.yaml").read_text())
    template = json.loads((KUBERAY / "prefect-job-template.json").read_text())
    address = template["variables"]["properties"]["env"]["default"]["RAY_ADDRESS"]
    assert address == f"ray://{cluster['metadata']['name']}-head-svc:10001"  # KubeRay's head service name


@pytest.mark.fault_matrix
def test_the_job_template_declares_every_placeholder_it_uses() -> None:
    from prefect.utilities.templating import find_placeholders

    template = json.loads((KUBERAY / "prefect-job-template.json").read_text())
    jsonschema.Draft202012Validator.check_schema(template["variables"])
    used = {p.name for p in find_placeholders(template["job_configuration"])}
    assert used and used <= set(template["variables"]["properties"])
    job = template["job_configuration"]["job_manifest"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "{{ image }}"


@pytest.mark.e2e
def test_prefect_accepts_the_job_template_for_a_kubernetes_pool(prefect_api: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    template = json.loads((KUBERAY / "prefect-job-template.json").read_text())
    with get_client(sync_client=True) as client:
        pool = client.create_work_pool(WorkPoolCreate(name="toolfactory-k8s-check", type="kubernetes", base_job_template=template), overwrite=True)
    assert pool.base_job_template == template
