"""A small MCP server over stdio (JSON-RPC by hand, standard library only: it starts fast) whose
tools misbehave on purpose. The first argument picks how it starts: `ok`, `banner` (a line of
non-protocol text first), `mute` (never answers `initialize`), `crash` (exits before
answering, saying a secret on stderr), `pages` (lists its tools on two pages)."""

from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
OBJECT = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "echo", "description": "Say the text back.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "env", "description": "The value of an environment variable.", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
    {"name": "write", "description": "Write a file in the working folder.", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}},
     "annotations": {"destructiveHint": True, "readOnlyHint": False}},
    {"name": "fail", "description": "Answer an error.", "inputSchema": OBJECT},
    {"name": "big", "description": "Answer 10,000 characters.", "inputSchema": OBJECT},
    {"name": "sleep", "description": "Never answer.", "inputSchema": OBJECT},
    {"name": "flood", "description": "Write one endless line.", "inputSchema": OBJECT},
    {"name": "garbage", "description": "Write endless non-protocol lines.", "inputSchema": OBJECT},
    {"name": "exit", "description": "Exit mid-call.", "inputSchema": OBJECT},
    {"name": "fork", "description": "Start many processes.", "inputSchema": OBJECT},
    {"name": "bad_schema", "description": "A tool whose schema is not valid JSON Schema.", "inputSchema": {"type": "object", "properties": {"x": {"type": "strnig"}}}},
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: int, body: str, is_error: bool = False) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": body}], "isError": is_error}})


def call(request_id: int, name: str, arguments: dict) -> None:
    if name == "echo":
        text(request_id, arguments.get("text", ""))
    elif name == "env":
        text(request_id, os.environ.get(arguments.get("name", ""), ""))
    elif name == "write":
        with open(arguments["path"], "w") as handle:
            handle.write(arguments["text"])
        text(request_id, "written")
    elif name == "fail":
        text(request_id, "the disk is on fire", is_error=True)
    elif name == "big":
        text(request_id, "y" * 10_000)
    elif name == "sleep":
        time.sleep(3600)
    elif name == "flood":
        while True:
            sys.stdout.write("x" * 65536)
    elif name == "garbage":
        while True:
            sys.stdout.write("this is not JSON-RPC\n" * 1000)
    elif name == "exit":
        os._exit(3)
    elif name == "fork":
        for _ in range(40):
            try:
                if os.fork() == 0:
                    time.sleep(3600)
                    os._exit(0)
            except OSError:
                break
        time.sleep(3600)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            if MODE == "mute":
                time.sleep(3600)
            if MODE == "crash":
                print(f"cannot start: token {os.environ.get('HOSTILE_TOKEN')} refused", file=sys.stderr, flush=True)
                sys.exit(1)
            if MODE == "banner":
                print("Hostile server 1.0 ready", flush=True)
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1.0"}, "instructions": "Tools that misbehave."}})
        elif method == "tools/list":
            if MODE == "pages" and not params.get("cursor"):
                send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS[:3], "nextCursor": "page-2"}})
            else:
                send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS[3:] if MODE == "pages" else TOOLS}})
        elif method == "tools/call":
            call(message["id"], params["name"], params.get("arguments") or {})
        else:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
