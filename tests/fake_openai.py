#!/usr/bin/python3
"""tests/fake_openai.py — a scripted OpenAI-compatible Chat Completions server
for tests/agent.sh, on 127.0.0.1 only.

    fake_openai.py SCRIPT PORTFILE LOGFILE

It listens on an ephemeral port of 127.0.0.1, writes the port to PORTFILE,
and answers each POST /v1/chat/completions with the next reply of SCRIPT, a
JSON file:

    {"key": "sk-..." | null,         the Authorization the requests must carry
     "model": "test-model",          the model they must ask for
     "replies": [REPLY, ...]}

A REPLY is one of
    {"tool": CODE}                   a call of run_python with {"code": CODE};
                                     "name" another tool's name, "arguments"
                                     the arguments string as sent, "id" the id,
                                     "calls": N that call N times (ids
                                     call_R_1 ... call_R_N in the Rth reply),
                                     "pad": N CODE with N more bytes ("#")
    {"answer": TEXT}                 the final answer (no tool call)
    {"message": {...}}               choices[0].message as given (a refusal,
                                     no content, ...)
    {"status": N, "body": TEXT,      a raw response ("$KEY" in TEXT: the key;
     "headers": {...}}               "repeat": N sends TEXT N times over)
and may have "content" (the assistant's text beside a tool call),
"finish_reason" (instead of "tool_calls" or "stop"), "delay"
(seconds to wait before answering), "hold" (a path: answer once it exists,
so that a test holds the request in flight as long as it needs; at most
120 s), "usage" (the usage object), and
expectations about the request, checked before answering:
    "roles": [...]                   the roles of its messages, exactly
    "last_tool_contains": S          its last message is a tool message holding S
    "last_user_contains": S          its last user message holds S
    "messages": N                    it has N messages

Every request is checked for the shape an OpenAI-compatible server wants
(method, path, Content-Type, Authorization exactly when a key is set, the
model, the tools array, tool_choice, the order of roles, and each assistant
tool call answered by exactly one tool message with its id, in order, before
the next assistant or user message).  A request that breaks any rule, or
one more than the script has replies for, is answered HTTP 400 with
{"error": {"message": "fake_openai: WHAT"}}, so that the test fails
visibly.  Each request is appended to LOGFILE as one JSON line:
{"n", "path", "auth" ("ok", "none" or "wrong"), "client_port" (the same for
requests on one kept-alive connection), "body", "violation"}.  A header
value "$DATE+N" in a reply is sent as the HTTP-date N seconds later.
"""
import json
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

script_path, port_path, log_path = sys.argv[1:4]
with open(script_path) as f:
    SCRIPT = json.load(f)
KEY = SCRIPT.get("key")
MODEL = SCRIPT.get("model", "test-model")
REPLIES = SCRIPT["replies"]
lock = threading.Lock()
count = 0


def check_tools(tools):
    """The tools array: run_python only, with its parameters' schema."""
    if not isinstance(tools, list) or len(tools) != 1:
        return "tools must be an array of one tool"
    t = tools[0]
    if t.get("type") != "function" or not isinstance(t.get("function"), dict):
        return "the tool must be {type: function, function: {...}}"
    fn = t["function"]
    if fn.get("name") != "run_python":
        return "the tool must be named run_python"
    if not isinstance(fn.get("description"), str) or len(fn["description"]) < 100:
        return "the tool needs a description"
    p = fn.get("parameters")
    if not isinstance(p, dict) or p.get("type") != "object" or p.get("required") != ["code"]:
        return "the parameters must be an object requiring code"
    props = p.get("properties", {})
    if props.get("code", {}).get("type") != "string" or \
            props.get("timeout", {}).get("type") != "number":
        return "code must be a string, timeout a number"
    return None


def check_messages(msgs):
    """Roles in order; every tool call answered once, in order, by id."""
    if not isinstance(msgs, list) or not msgs:
        return "messages must be a non-empty array"
    if msgs[0].get("role") != "system" or not isinstance(msgs[0].get("content"), str):
        return "the first message must be the system message"
    pending = []  # ids of tool calls not answered yet, in order
    seen_user = False
    for i, m in enumerate(msgs[1:], 1):
        role = m.get("role")
        if role not in ("user", "assistant", "tool"):
            return "message %d has role %r" % (i, role)
        if role != "tool" and pending:
            return "message %d (%s) comes before tool calls %s are answered" % (i, role, pending)
        if role == "user":
            if not isinstance(m.get("content"), str) or not m["content"]:
                return "user message %d has no content" % i
            seen_user = True
        elif role == "assistant":
            if not seen_user:
                return "assistant message %d before any user message" % i
            calls = m.get("tool_calls") or []
            if not calls and not isinstance(m.get("content"), str):
                return "assistant message %d has neither content nor tool calls" % i
            for c in calls:
                fn = c.get("function", {})
                if c.get("type") != "function" or not isinstance(c.get("id"), str) or \
                        not isinstance(fn.get("name"), str) or \
                        not isinstance(fn.get("arguments"), str):
                    return "assistant message %d has a malformed tool call" % i
                pending.append(c["id"])
        else:
            if not pending:
                return "tool message %d answers no tool call" % i
            if m.get("tool_call_id") != pending[0]:
                return "tool message %d has tool_call_id %r, expected %r" % (
                    i, m.get("tool_call_id"), pending[0])
            if not isinstance(m.get("content"), str):
                return "tool message %d has no content" % i
            pending.pop(0)
    if pending:
        return "the last tool calls %s are not answered" % pending
    if msgs[-1].get("role") not in ("user", "tool"):
        return "the last message must be the user's or a tool's"
    return None


def check_expectations(reply, msgs):
    roles = [m.get("role") for m in msgs]
    if "roles" in reply and roles != reply["roles"]:
        return "roles %s, expected %s" % (roles, reply["roles"])
    if "messages" in reply and len(msgs) != reply["messages"]:
        return "%d messages, expected %d" % (len(msgs), reply["messages"])
    if "last_tool_contains" in reply:
        last = msgs[-1]
        if last.get("role") != "tool" or reply["last_tool_contains"] not in last.get("content", ""):
            return "the last message is not a tool message holding %r: %r" % (
                reply["last_tool_contains"], last)
    if "last_user_contains" in reply:
        users = [m for m in msgs if m.get("role") == "user"]
        if not users or reply["last_user_contains"] not in users[-1]["content"]:
            return "the last user message does not hold %r" % reply["last_user_contains"]
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, why):
        self.send(400, json.dumps({"error": {"message": "fake_openai: " + why,
                                             "type": "invalid_request_error"}}))

    def do_GET(self):
        self.refuse("method GET, expected POST")

    do_PUT = do_DELETE = do_GET

    def do_POST(self):
        global count
        n_bytes = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(n_bytes)
        auth = self.headers.get("Authorization")
        with lock:
            count += 1
            n = count
            reply = REPLIES[n - 1] if n <= len(REPLIES) else None
        why = None
        try:
            body = json.loads(raw)
        except ValueError:
            body, why = None, "the body is not JSON"
        auth_state = "none" if auth is None else ("ok" if KEY and auth == "Bearer " + KEY
                                                  else "wrong")
        if why is None and self.path != "/v1/chat/completions":
            why = "path %s, expected /v1/chat/completions" % self.path
        if why is None and self.headers.get("Content-Type") != "application/json":
            why = "Content-Type %r" % self.headers.get("Content-Type")
        if why is None and (KEY and auth_state != "ok" or not KEY and auth is not None):
            why = "Authorization %s, expected %s" % (auth_state, "the key" if KEY else "none")
        if why is None and (not isinstance(body, dict) or body.get("model") != MODEL):
            why = "model %r, expected %r" % (body.get("model") if isinstance(body, dict)
                                             else None, MODEL)
        if why is None:
            why = check_tools(body.get("tools"))
        if why is None and body.get("tool_choice") != "auto":
            why = "tool_choice must be auto"
        if why is None:
            why = check_messages(body.get("messages"))
        if why is None and reply is None:
            why = "request %d, but the script has %d replies" % (n, len(REPLIES))
        if why is None:
            why = check_expectations(reply, body["messages"])
        with lock:
            with open(log_path, "a") as f:
                f.write(json.dumps({"n": n, "path": self.path, "auth": auth_state,
                                    "client_port": self.client_address[1],
                                    "body": body, "violation": why}) + "\n")
        if reply and reply.get("delay"):
            time.sleep(reply["delay"])
        if reply and reply.get("hold"):
            deadline = time.monotonic() + 120
            while not os.path.exists(reply["hold"]) and time.monotonic() < deadline:
                time.sleep(0.05)
        if why is not None:
            self.refuse(why)
            return
        if "status" in reply:
            text = reply.get("body", "") * reply.get("repeat", 1)
            if KEY:
                text = text.replace("$KEY", KEY)
            headers = dict(reply.get("headers", {}))
            for k, v in headers.items():  # "$DATE+N": the HTTP-date N seconds on
                if v.startswith("$DATE+"):
                    headers[k] = formatdate(time.time() + float(v[6:]), usegmt=True)
            self.send(reply["status"], text, headers)
            return
        msg = {"role": "assistant", "content": reply.get("content")}
        if "message" in reply:
            msg = reply["message"]
            finish = "stop"
        elif "tool" in reply or "arguments" in reply:
            code = reply.get("tool", "") + "#" * reply.get("pad", 0)
            args = reply.get("arguments", json.dumps({"code": code}))
            calls = reply.get("calls")
            msg["tool_calls"] = [{"id": reply.get("id", "call_%d" % n) if calls is None
                                  else "call_%d_%d" % (n, k + 1), "type": "function",
                                  "function": {"name": reply.get("name", "run_python"),
                                               "arguments": args}}
                                 for k in range(calls or 1)]
            finish = "tool_calls"
        else:
            msg["content"] = reply["answer"]
            finish = "stop"
        finish = reply.get("finish_reason", finish)
        usage = reply.get("usage", {"prompt_tokens": 100, "completion_tokens": 10,
                                    "total_tokens": 110})
        self.send(200, json.dumps({"id": "chatcmpl-%d" % n, "object": "chat.completion",
                                   "created": int(time.time()), "model": MODEL,
                                   "choices": [{"index": 0, "message": msg,
                                                "finish_reason": finish}],
                                   "usage": usage}))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(port_path + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(port_path + ".tmp", port_path)
server.serve_forever()
