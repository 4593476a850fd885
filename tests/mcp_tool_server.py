#!/usr/bin/python3
# tests/mcp_tool_server.py — a small MCP server (stdio transport, one
# JSON-RPC message a line) for tests/functions.sh: its tools become host
# functions.  search (read-only; "fail" is an error result, "slow" takes
# 5 s), delete_order (not read-only), order-count (read-only, with an
# outputSchema and structured content).  Each call runs in a thread of its
# own, so a slow one holds up no other; each is appended to the file
# $MCP_TOOL_LOG, when set.
import json
import os
import sys
import threading
import time

lock = threading.Lock()


def send(m):
    with lock:
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()


TOOLS = [
    {"name": "search", "description": "Search orders by text.",
     "inputSchema": {"type": "object",
                     "properties": {"q": {"type": "string"},
                                    "limit": {"type": "integer", "default": 3}},
                     "required": ["q"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "delete_order", "description": "Delete one order.",
     "inputSchema": {"type": "object", "properties": {"order_id": {"type": "string"}},
                     "required": ["order_id"]}},
    {"name": "order-count", "description": "How many orders.",
     "inputSchema": {"type": "object", "properties": {}},
     "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
     "annotations": {"readOnlyHint": True}},
]


def result(m, r):
    send({"jsonrpc": "2.0", "id": m["id"], "result": r})


def text(t, error=False):
    r = {"content": [{"type": "text", "text": t}]}
    if error:
        r["isError"] = True
    return r


def call(m, p):
    n, a = p["name"], p.get("arguments", {})
    if os.environ.get("MCP_TOOL_LOG"):
        with lock, open(os.environ["MCP_TOOL_LOG"], "a") as f:
            f.write(json.dumps({"name": n, "arguments": a}) + "\n")
    if n == "search" and a.get("q") == "slow":
        time.sleep(5)
    if n == "search" and a.get("q") == "fail":
        result(m, text("search is down", error=True))
    elif n == "search":
        result(m, text("found %s (limit %s)" % (a["q"], a.get("limit", 3))))
    elif n == "order-count":
        r = text('{"count": 7}')
        r["structuredContent"] = {"count": 7}
        result(m, r)
    elif n == "delete_order":
        result(m, text("deleted"))
    else:
        send({"jsonrpc": "2.0", "id": m["id"],
              "error": {"code": -32602, "message": "no tool " + n}})


for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth, p = m.get("method"), m.get("params", {})
    if meth == "initialize":
        result(m, {"protocolVersion": p.get("protocolVersion"), "capabilities": {"tools": {}},
                   "serverInfo": {"name": "shop", "version": "1"}})
    elif meth == "tools/list":
        result(m, {"tools": TOOLS})
    elif meth == "tools/call":
        threading.Thread(target=call, args=(m, p), daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": m["id"],
              "error": {"code": -32601, "message": "no method " + str(meth)}})
