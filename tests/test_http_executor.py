"""The real HTTP tool executor against a real local HTTP server (and a TLS one).

Replaced in places: only the resolver (`http_executor.resolve`), since no DNS exists offline; a
recording `httpx.MockTransport` stands in for the network where a test proves nothing was sent.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic import ValidationError

from toolfactory.models import Function, Tool, ToolCall
from toolfactory.stages.dialogues import http_executor
from toolfactory.stages.dialogues.http_executor import (
    HttpExecutorSettings,
    PlanError,
    allowlisted,
    base_url,
    call_http,
    calls_for_real,
    forbidden_reason,
    plan_request,
)

SECRET = "s3cr3t-Value-Q7xZ"
STOP = threading.Event()


class Handler(BaseHTTPRequestHandler):
    """Endpoints under /v1; every request is recorded on the server (`server.seen`)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers)})  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        if path.startswith("/v1/echo"):
            echo = {"method": self.command, "path": path, "query": parse_qs(urlsplit(self.path).query),
                    "body": json.loads(raw) if raw else None, "headers": dict(self.headers)}
            self._reply(200, json.dumps(echo).encode())
        elif path == "/v1/text":
            self._reply(200, b"plain words", "text/plain; charset=utf-8")
        elif path == "/v1/missing":
            self._reply(404, json.dumps({"message": "no such pet"}).encode())
        elif path == "/v1/big":
            self._reply(200, json.dumps({"blob": "x" * 5000}).encode())
        elif path == "/v1/stream":  # no Content-Length: the body ends when the connection closes
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b" " * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/v1/slow":
            STOP.wait(5)
            self._reply(200, b"{}")
        elif path == "/v1/redirect-out":
            self._reply(302, b"", Location="http://evil.example.net/steal")
        elif path == "/v1/redirect-in":
            self._reply(302, b"", Location="/v1/echo/next")
        else:
            self._reply(404, b"{}")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


def _serve(context: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, threading.Thread]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    STOP.clear()
    server, thread = _serve()
    yield server
    STOP.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture()
def seen(server: ThreadingHTTPServer) -> list[dict[str, Any]]:
    server.seen.clear()  # type: ignore[attr-defined]
    return server.seen  # type: ignore[attr-defined,no-any-return]


@pytest.fixture()
def base(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def tool_at(url: str, *functions: Function) -> Tool:
    return Tool(name="Pets", link=url, functions=list(functions))


def fn(path: str, method: str = "GET") -> Function:
    return Function(name="op", method=method, path=path)


def call(**arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name="op", arguments=json.dumps(arguments))


def local(base: str, **overrides: Any) -> HttpExecutorSettings:
    return HttpExecutorSettings(**{"allowlist": [base], "allow_private": True, **overrides})


def run(tool: Tool, function: Function, tool_call: ToolCall, settings: HttpExecutorSettings,
        client: Callable[[], httpx.AsyncClient] | None = None) -> dict[str, Any]:
    """`call_http` in a fresh event loop, with a client made (and closed) inside it when given."""
    async def go() -> dict[str, Any]:
        if client is None:
            return await call_http(tool, function, tool_call, settings)
        async with client() as made:
            return await call_http(tool, function, tool_call, settings, made)
    return asyncio.run(go())


class Recorder:
    """A transport that records instead of sending: proof that nothing went out."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def client(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return httpx.Response(200, json={"reached": True})
        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


# --- planning -------------------------------------------------------------------------------


def test_base_url_prefers_the_openapi_server_with_variable_defaults() -> None:
    openapi = {"servers": [{"url": "https://{region}.api.example.com/v2", "variables": {"region": {"default": "eu"}}}]}
    assert base_url(Tool(name="t", link="https://other.example.com", openapi=openapi)) == "https://eu.api.example.com/v2"


def test_base_url_falls_back_to_link_and_rejects_non_http() -> None:
    assert base_url(Tool(name="t", link="https://api.example.com/v1")) == "https://api.example.com/v1"
    assert base_url(Tool(name="t", link="ftp://files.example.com")) is None
    assert base_url(Tool(name="t")) is None


def test_plan_request_puts_arguments_in_the_query_for_get_and_in_the_body_for_post() -> None:
    tool = tool_at("https://api.example.com/v1")
    get = plan_request(tool, fn("/pets/{pet_id}"), {"pet_id": "a/b c", "limit": 3, "tags": ["x", "y"], "skip": None})
    assert (get.method, get.url, get.params, get.json) == ("GET", "https://api.example.com/v1/pets/a%2Fb%20c",
                                                            {"limit": 3, "tags": ["x", "y"]}, None)
    post = plan_request(tool, fn("/pets/{pet_id}/notes", "post"), {"pet_id": 7, "text": "hi"})
    assert (post.method, post.url, post.params, post.json) == ("POST", "https://api.example.com/v1/pets/7/notes", {}, {"text": "hi"})


def test_plan_request_uses_a_full_url_path_as_it_is() -> None:
    planned = plan_request(Tool(name="t"), fn("https://x.p.rapidapi.com/search/{q}"), {"q": "cats"})
    assert planned.url == "https://x.p.rapidapi.com/search/cats"


@pytest.mark.parametrize("arguments, message", [
    ({}, "missing path parameter 'pet_id'"),
    ({"pet_id": ".."}, "may not be '..'"),
    ({"pet_id": {"a": 1}}, "must be a string or a number"),
])
def test_plan_request_refuses_unusable_path_parameters(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan_request(tool_at("https://api.example.com/v1"), fn("/pets/{pet_id}"), arguments)


def test_settings_reject_an_allowlist_entry_that_is_not_an_http_url() -> None:
    with pytest.raises(ValidationError, match="not an http"):
        HttpExecutorSettings(allowlist=["ftp://api.example.com"])


@pytest.mark.parametrize("url, expected", [
    ("https://api.example.com/v1", True),
    ("https://api.example.com/v1/pets?x=1", True),
    ("https://API.Example.com:443/v1/pets", True),
    ("https://api.example.com./v1/pets", True),
    ("https://api.example.com/v10", False),
    ("https://api.example.com/", False),
    ("https://api.example.com/v1/../admin", False),
    ("http://api.example.com/v1", False),
    ("https://api.example.com:8443/v1", False),
    ("https://sub.api.example.com/v1", False),
    ("https://api.example.com.evil.net/v1", False),
    ("https://api.example.com@evil.net/v1", False),
    ("https://user:pw@api.example.com/v1", False),
    ("file:///etc/passwd", False),
])
def test_allowlist_compares_scheme_host_port_and_path_segments(url: str, expected: bool) -> None:
    assert allowlisted(url, ["https://api.example.com/v1/"]) is expected


def test_calls_for_real_only_for_allowlisted_tools() -> None:
    settings = HttpExecutorSettings(allowlist=["https://api.example.com/v1"])
    assert calls_for_real(tool_at("https://api.example.com/v1"), fn("/pets"), settings)
    assert not calls_for_real(tool_at("https://elsewhere.example.com/v1"), fn("/pets"), settings)
    assert not calls_for_real(Tool(name="t"), fn("/pets"), settings)


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("192.168.0.1", "private"), ("169.254.169.254", "link-local"),
    ("fe80::1%eth0", "link-local"), ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"), ("100.64.0.1", "non-global"), ("64:ff9b::a00:1", "private"),
    ("2002:7f00:1::", "loopback"), ("93.184.216.34", None), ("2606:4700:4700::1111", None),
])
def test_forbidden_reason_names_the_kind_of_address(address: str, reason: str | None) -> None:
    assert forbidden_reason(address) == reason


# --- requests to the local server (allow_private=True) ----------------------------------------


def test_path_parameters_are_substituted_and_quoted(base: str, seen: list[dict[str, Any]]) -> None:
    function = fn("/echo/{owner}/pets/{pet_id}")
    body = run(tool_at(base), function, call(owner="ann lee/x?", pet_id=7, limit=2), local(base))
    assert body["status_code"] == 200
    assert seen[0]["path"] == "/v1/echo/ann%20lee%2Fx%3F/pets/7?limit=2"
    assert body["response"]["query"] == {"limit": ["2"]}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_query_methods_send_arguments_as_query_parameters(base: str, method: str) -> None:
    body = run(tool_at(base), fn("/echo", method), call(q="cats", n=3, flag=True), local(base))
    echo = body["response"]
    assert (echo["method"], echo["query"], echo["body"]) == (method, {"q": ["cats"], "n": ["3"], "flag": ["true"]}, None)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_body_methods_send_arguments_as_json(base: str, method: str) -> None:
    body = run(tool_at(base), fn("/echo/{id}", method), call(id="p1", name="Rex", tags=["a"]), local(base))
    echo = body["response"]
    assert (echo["method"], echo["path"], echo["query"], echo["body"]) == (method, "/v1/echo/p1", {}, {"name": "Rex", "tags": ["a"]})
    assert echo["headers"]["Content-Type"] == "application/json"


def test_json_is_parsed_and_text_stays_text(base: str) -> None:
    assert isinstance(run(tool_at(base), fn("/echo"), call(), local(base))["response"], dict)
    assert run(tool_at(base), fn("/text"), call(), local(base)) == {"status_code": 200, "response": "plain words"}


def test_an_http_error_status_becomes_an_error_body(base: str) -> None:
    assert run(tool_at(base), fn("/missing"), call(), local(base)) == {"status_code": 404, "error": '{"message": "no such pet"}'}


def test_a_missing_path_parameter_is_an_error_body_and_sends_nothing(base: str, seen: list[dict[str, Any]]) -> None:
    body = run(tool_at(base), fn("/echo/{pet_id}"), call(), local(base))
    assert body == {"status_code": 400, "error": "missing path parameter 'pet_id'"}
    assert seen == []


def test_arguments_that_are_not_a_json_object_are_an_error_body(base: str) -> None:
    body = run(tool_at(base), fn("/echo"), ToolCall(id="c", name="op", arguments="[1]"), local(base))
    assert body == {"status_code": 400, "error": "arguments must be a JSON object"}


def test_a_body_over_max_bytes_is_an_error_body_by_content_length(base: str) -> None:
    body = run(tool_at(base), fn("/big"), call(), local(base, max_bytes=1000))
    assert body == {"status_code": 200, "error": "response body exceeds max_bytes (1000); not read"}


def test_a_streamed_body_is_cut_at_max_bytes(base: str) -> None:
    started = time.monotonic()
    body = run(tool_at(base), fn("/stream"), call(), local(base, max_bytes=100_000))
    assert body == {"status_code": 200, "error": "response body exceeds max_bytes (100000); not read"}
    assert time.monotonic() - started < 5


def test_a_slow_response_times_out_into_an_error_body(base: str) -> None:
    started = time.monotonic()
    body = run(tool_at(base), fn("/slow"), call(), local(base, timeout_s=0.3))
    assert body == {"status_code": 0, "error": "no response within 0.3 s"}
    assert time.monotonic() - started < 2


def test_a_redirect_to_another_host_is_not_followed_nor_named(base: str, seen: list[dict[str, Any]]) -> None:
    body = run(tool_at(base), fn("/redirect-out"), call(), local(base))
    assert body == {"status_code": 302, "error": "redirects are not followed (to a location outside the allowlist)"}
    assert "evil" not in json.dumps(body)
    assert len(seen) == 1


def test_a_redirect_inside_the_allowlist_is_not_followed_but_named(base: str, seen: list[dict[str, Any]]) -> None:
    body = run(tool_at(base), fn("/redirect-in"), call(), local(base))
    assert body == {"status_code": 302, "error": "redirects are not followed (to 127.0.0.1)"}
    assert len(seen) == 1


def test_a_closed_port_is_an_error_body() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    body = run(tool_at(url), fn("/x"), call(), local(url))
    assert body["status_code"] == 0 and body["error"].startswith("request failed: ConnectError")


def test_the_connection_goes_to_the_vetted_address(base: str, seen: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """api.test exists in no DNS: the request can only arrive if httpx connects to the address we resolved."""
    port = urlsplit(base).port
    lookups: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(http_executor, "resolve", resolver)
    url = f"http://api.test:{port}/v1"
    body = run(tool_at(url), fn("/echo"), call(), local(url))
    assert body["status_code"] == 200
    assert seen[0]["headers"]["Host"] == f"api.test:{port}"
    assert lookups == ["api.test"]


# --- refusals (default allow_private=False) ---------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "[::1]", "10.1.2.3", "169.254.169.254"])
def test_private_addresses_are_refused_without_a_connection(host: str, server: ThreadingHTTPServer,
                                                            seen: list[dict[str, Any]]) -> None:
    url = f"http://{host}:{server.server_address[1]}/v1"
    recorder = Recorder()
    body = run(tool_at(url), fn("/echo"), call(), HttpExecutorSettings(allowlist=[url]), recorder.client)
    assert body["status_code"] == 0
    assert "address: refused" in body["error"]
    assert recorder.requests == [] and seen == []


def test_private_addresses_are_refused_by_the_default_client(base: str, seen: list[dict[str, Any]]) -> None:
    body = run(tool_at(base), fn("/echo"), call(), HttpExecutorSettings(allowlist=[base]))
    assert body == {"status_code": 0, "error": "127.0.0.1 resolves to 127.0.0.1, a loopback address: refused "
                                               "(set allow_private only for local test servers)"}
    assert seen == []


def test_a_dns_answer_mixing_public_and_private_addresses_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]

    monkeypatch.setattr(http_executor, "resolve", resolver)
    recorder = Recorder()
    url = "https://api.example.com/v1"
    body = run(tool_at(url), fn("/pets"), call(), HttpExecutorSettings(allowlist=[url]), recorder.client)
    assert body["error"] == "api.example.com resolves to 10.0.0.7, a private address: refused (set allow_private only for local test servers)"
    assert recorder.requests == []


def test_a_public_dns_answer_is_called_at_the_pinned_address(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    monkeypatch.setattr(http_executor, "resolve", resolver)
    recorder = Recorder()
    url = "https://api.example.com/v1"
    body = run(tool_at(url), fn("/pets"), call(), HttpExecutorSettings(allowlist=[url]), recorder.client)
    assert body == {"status_code": 200, "response": {"reached": True}}
    sent = recorder.requests[0]
    assert (str(sent.url), sent.headers["Host"], sent.extensions["sni_hostname"]) == (
        "https://93.184.216.34/v1/pets", "api.example.com", "api.example.com")


def test_an_unresolvable_host_is_an_error_body(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(http_executor, "resolve", resolver)
    url = "https://api.example.com/v1"
    body = run(tool_at(url), fn("/pets"), call(), HttpExecutorSettings(allowlist=[url]))
    assert body == {"status_code": 0, "error": "cannot resolve api.example.com: Name or service not known"}


@pytest.mark.parametrize("url, path", [
    ("https://elsewhere.example.com/v1", "/pets"),
    ("https://api.example.com/v1", "/../admin"),
    ("https://api.example.com/v1", "https://evil.example.net/pets"),
])
def test_urls_outside_the_allowlist_are_refused_before_dns(url: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lookups: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["93.184.216.34"]

    monkeypatch.setattr(http_executor, "resolve", resolver)
    recorder = Recorder()
    body = run(tool_at(url), fn(path), call(), HttpExecutorSettings(allowlist=["https://api.example.com/v1"]), recorder.client)
    assert body["status_code"] == 0 and "is not in the allowlist" in body["error"]
    assert lookups == [] and recorder.requests == []


# --- secrets ----------------------------------------------------------------------------------


def test_secret_headers_are_sent_but_never_returned_or_logged(base: str, seen: list[dict[str, Any]],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TF_TEST_PETS_KEY", SECRET)
    settings = local(base, headers={"Accept": "application/json"}, headers_from_env={"X-Api-Key": "TF_TEST_PETS_KEY"})
    body = run(tool_at(base), fn("/echo"), call(), settings)
    assert seen[0]["headers"]["X-Api-Key"] == SECRET and seen[0]["headers"]["Accept"] == "application/json"
    assert body["response"]["headers"]["X-Api-Key"] == "[redacted]"  # the API echoed it; we do not pass it on
    assert SECRET not in json.dumps(body)
    assert caplog.records and SECRET not in caplog.text
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_a_missing_secret_variable_is_an_error_body_and_sends_nothing(base: str, seen: list[dict[str, Any]]) -> None:
    settings = local(base, headers_from_env={"X-Api-Key": "TF_TEST_UNSET_KEY"})
    body = run(tool_at(base), fn("/echo"), call(), settings)
    assert body == {"status_code": 0, "error": "environment variable TF_TEST_UNSET_KEY (for header X-Api-Key) is not set"}
    assert seen == []


# --- TLS: the certificate is checked against the host name, not the pinned address ------------


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    x509 = pytest.importorskip("cryptography.x509", reason="cryptography makes the test certificate")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.mark.parametrize("certified, ok", [("api.test", True), ("other.test", False)])
def test_tls_to_the_pinned_address_verifies_the_host_name(certified: str, ok: bool, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cert_path, key_path = _certificate(tmp_path, certified)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_path, key_path)
    tls_server, thread = _serve(server_context)

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    monkeypatch.setattr(http_executor, "resolve", resolver)
    url = f"https://api.test:{tls_server.server_address[1]}/v1"
    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert_path)), trust_env=False)

    try:
        body = run(tool_at(url), fn("/echo"), call(), local(url), client)
    finally:
        tls_server.shutdown()
        tls_server.server_close()
        thread.join(5)
    if ok:
        assert body["status_code"] == 200 and body["response"]["headers"]["Host"] == f"api.test:{tls_server.server_address[1]}"
    else:
        assert body["status_code"] == 0 and "CERTIFICATE_VERIFY_FAILED" in body["error"]
        assert tls_server.seen == []  # type: ignore[attr-defined]
