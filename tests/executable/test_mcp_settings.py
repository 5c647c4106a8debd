"""`tools.mcp` entries: one transport each, secrets by reference, and clear errors naming the field."""

from __future__ import annotations

import pytest

from toolfactory.errors import ConfigError
from toolfactory.executable.mcp import McpSourceSettings


def test_a_source_needs_exactly_one_of_command_and_url() -> None:
    for fields in ({}, {"command": "x", "url": "http://localhost/mcp"}):
        with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]: set exactly one of `command`"):
            McpSourceSettings(name="s", **fields)


def test_stdio_fields_on_an_http_source_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]\.env: only for a server started over stdio"):
        McpSourceSettings(name="s", url="http://localhost/mcp", env={"A": "b"})
    with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]\.state_files"):
        McpSourceSettings(name="s", url="http://localhost/mcp", state_files=True)


def test_headers_from_env_are_for_http_sources_only() -> None:
    with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]\.headers_from_env: only for a server reached over HTTP"):
        McpSourceSettings(name="s", command="x", headers_from_env={"Authorization": "TOKEN"})


def test_env_references_are_resolved_when_asked_and_an_unset_one_is_named_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = McpSourceSettings(name="s", command="x", env={"TOKEN": "Bearer ${MCP_TEST_TOKEN}", "DATA": "${TOOLFACTORY_WORKDIR}/db"})
    monkeypatch.setenv("MCP_TEST_TOKEN", "abc123")
    assert settings.resolved_env("/tmp/w") == {"TOKEN": "Bearer abc123", "DATA": "/tmp/w/db"}
    assert settings.secret_values() == ["abc123"] and "abc123" not in settings.model_dump_json()
    monkeypatch.delenv("MCP_TEST_TOKEN")
    with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]\.env\.TOKEN: environment variable MCP_TEST_TOKEN is not set"):
        settings.resolved_env("/tmp/w")


def test_args_may_name_the_working_folder_but_no_secret() -> None:
    settings = McpSourceSettings(name="s", command="x", args=["--root", "${TOOLFACTORY_WORKDIR}"])
    assert settings.resolved_args("/tmp/w") == ["--root", "/tmp/w"]
    with pytest.raises(ConfigError, match=r"tools\.mcp\[s\]\.args\[1\]: only \$\{TOOLFACTORY_WORKDIR\} may be used here"):
        McpSourceSettings(name="s", command="x", args=["--token", "${SECRET}"])


def test_headers_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = McpSourceSettings(name="s", url="https://example.org/mcp", headers_from_env={"Authorization": "MCP_TEST_AUTH"})
    with pytest.raises(ConfigError, match=r"headers_from_env\.Authorization: environment variable MCP_TEST_AUTH is not set"):
        settings.resolved_headers()
    monkeypatch.setenv("MCP_TEST_AUTH", "Bearer xyz")
    assert settings.resolved_headers() == {"Authorization": "Bearer xyz"}


def test_a_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="url"):
        McpSourceSettings(name="s", url="ftp://example.org/mcp")


def test_an_environment_crosses_processes_as_its_settings() -> None:
    import pickle

    from toolfactory.executable.mcp import McpEnvironment

    env = McpEnvironment(McpSourceSettings(name="s", command="x", env={"T": "${SECRET}"}))
    copy = pickle.loads(pickle.dumps(env))
    assert (copy.name, copy.settings) == ("s", env.settings)
