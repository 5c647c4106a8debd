"""A headless Chromium driven over the DevTools protocol: load a page, collect what its console
and network report as errors, and take a screenshot — what a reader's browser would show."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


@dataclass
class Visit:
    errors: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    images_loaded: bool = False


def _page_socket(port: int) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as response:
                targets = json.load(response)
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("Chromium opened no page target")


def _port(process: subprocess.Popen[str]) -> int:
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if "DevTools listening on ws://" in line:
            return int(line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        if not line and process.poll() is not None:
            break
    raise RuntimeError("Chromium did not start its DevTools endpoint")


def visit(chromium: str, page: Path, width: int = 1400, height: int = 1000) -> Visit:
    """Load `page` (a local file) and return its errors, whether every image loaded, and a PNG."""
    profile = tempfile.mkdtemp(prefix="toolfactory-chromium-")
    process = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": profile})
    try:
        with connect(_page_socket(_port(process)), max_size=None, open_timeout=20) as socket:
            counter = 0
            result = Visit()

            def send(method: str, **params: Any) -> dict[str, Any]:
                nonlocal counter
                counter += 1
                socket.send(json.dumps({"id": counter, "method": method, "params": params}))
                while True:
                    message = json.loads(socket.recv(timeout=60))
                    if message.get("id") == counter:
                        return dict(message.get("result") or {})
                    note(message)

            def note(message: dict[str, Any]) -> None:
                method, params = message.get("method"), message.get("params") or {}
                if method == "Runtime.exceptionThrown":
                    result.errors.append(str(params.get("exceptionDetails", {}).get("text")))
                elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    result.errors.append(json.dumps(params.get("args")))
                elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                    result.errors.append(str(params["entry"].get("text")) + " " + str(params["entry"].get("url", "")))
                elif method == "Network.loadingFailed":
                    result.errors.append(f"failed to load: {params.get('errorText')}")

            for domain in ("Runtime", "Log", "Page", "Network"):
                send(f"{domain}.enable")
            send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
            send("Page.navigate", url=page.resolve().as_uri())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                message = json.loads(socket.recv(timeout=60))
                note(message)
                if message.get("method") == "Page.loadEventFired":
                    break
            loaded = send("Runtime.evaluate", expression="Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)",
                          returnByValue=True)
            result.images_loaded = bool(loaded.get("result", {}).get("value"))
            shot = send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
            result.screenshot = base64.b64decode(shot["data"])
            return result
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(profile, ignore_errors=True)
