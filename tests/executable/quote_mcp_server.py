"""A small MCP server over stdio (JSON-RPC by hand, standard library only) whose answers and
version come from its environment: `QUOTE_PRICE` is what `quote` answers, `QUOTE_VERSION` the
version it gives in `initialize`. Two configurations of it are one source before and after an
upgrade that changed its answers."""

from __future__ import annotations

import json
import os
import sys

TOOLS = [{"name": "quote", "description": "The price of a stock symbol.",
          "inputSchema": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "quotes", "version": os.environ.get("QUOTE_VERSION", "1.0")}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": TOOLS}})
        elif method == "tools/call":
            symbol = (params.get("arguments") or {}).get("symbol", "")
            body = json.dumps({"symbol": symbol, "price": float(os.environ.get("QUOTE_PRICE", "10"))})
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": body}], "isError": False}})
        else:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
