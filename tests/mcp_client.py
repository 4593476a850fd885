#!/usr/bin/python3
"""tests/mcp_client.py KBOX RESULT_SCHEMA — an MCP client of `kbox mcp`,
written from the specification (revision 2025-11-25: lifecycle, tools,
cancellation, ping; JSON-RPC 2.0), speaking the stdio transport to it
directly: one JSON-RPC message a line.  Prints TAP.  KBOX_HOME must be
set (a private one)."""
import base64
import glob
import hashlib
import json
import re
import os
import signal
import subprocess
import sys
import time

import jsonschema

from mcp_lib import (KBOX, HOME, LATEST, Server, check, err_code, gone, ok_result, plan,
                     sessions, text_of)

RESULT_SCHEMA = sys.argv[2]
full_schema = json.load(open(RESULT_SCHEMA))
full_validator = jsonschema.Draft202012Validator(full_schema)

# ---- lifecycle ----
# the whole result as structured content, to check it against its schema
# (what a model reads in each kind of client: mcp_views.py)
s = Server("--structured", "full")


def t_before_init():
    assert ok_result(s.request("ping")) == {}
    r = s.request("tools/list")
    assert err_code(r) == -32600, r


check("before_initialize_only_ping_is_answered_and_others_get_invalid_request", t_before_init)


def t_init_latest():
    r = ok_result(s.init(LATEST))
    assert r["protocolVersion"] == LATEST, r
    assert r["serverInfo"]["name"] == "kbox" and r["serverInfo"]["version"], r
    assert "tools" in r["capabilities"], r
    assert err_code(s.request("initialize", {"protocolVersion": LATEST})) == -32600


check("initialize_answers_the_latest_version_asked_for_and_only_once", t_init_latest)


def t_init_versions():
    for asked, answered in (("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
                            ("1999-01-01", LATEST)):
        o = Server()
        r = ok_result(o.init(asked))
        assert r["protocolVersion"] == answered, (asked, r)
        assert o.close(30) == 0
    o = Server()
    assert err_code(o.request("initialize", {"capabilities": {}})) == -32602
    o.close(30)


check("an_older_supported_version_is_kept_an_unknown_one_gets_the_latest", t_init_versions)

tools = {}


def t_tools_list():
    r = ok_result(s.request("tools/list"))
    for t in r["tools"]:
        tools[t["name"]] = t
    assert sorted(tools) == ["list_files", "new_session", "read_file", "read_image",
                             "run_python", "wait_python", "write_file"], sorted(tools)
    for t in tools.values():
        assert t["inputSchema"]["type"] == "object", t
        jsonschema.Draft202012Validator.check_schema(t["inputSchema"])
    out = tools["run_python"]["outputSchema"]
    assert out["type"] == "object"
    jsonschema.Draft202012Validator.check_schema(out)
    assert out["$defs"] == full_schema["$defs"], "outputSchema's $defs differ from the file's"
    assert tools["run_python"]["inputSchema"]["required"] == ["code"]
    # every tool on a session takes its handle, as the result of new_session
    # tells the model (wait_python too: newcomer report 8, F1)
    for name, t in tools.items():
        props = t["inputSchema"]["properties"]
        assert ("session" in props) == (name != "new_session"), (name, sorted(props))
        assert t["inputSchema"]["additionalProperties"] is False, name
    # the same tool as kbox tool-schema --format mcp
    ts = json.loads(subprocess.run([KBOX, "tool-schema", "--format", "mcp", "--structured",
                                    "full"], capture_output=True, text=True, check=True).stdout)
    assert ts == tools["run_python"], "tool-schema --format mcp differs"


check("tools_list_has_seven_tools_with_valid_2020_12_schemas", t_tools_list)

r1 = r2 = None


def t_state():
    global r1, r2
    r1 = s.call("run_python", {"code": "x = 41\nprint('x is', x)"})
    r2 = s.call("run_python", {"code": "x + 1"})
    # the session is new: the first result's first line says so
    assert re.fullmatch(r"\[note: new session mcp-[0-9]+-[0-9a-f]+: nothing was defined before this call\]\n"
                        r"x is 41\n", text_of(r1)), text_of(r1)
    # and the person hears of it on standard error, as one this server removes
    assert re.search(r"^kbox mcp: session mcp-[0-9]+-[0-9a-f]+ is new: started it for this "
                     r"connection \(removed when it ends\)$", s.stderr(), re.M), s.stderr()
    assert text_of(r2) == "Out[2]: 42\n", text_of(r2)
    # an execution that prints nothing says so: never an empty block
    r3 = s.call("run_python", {"code": "y = 1"})
    assert r3["result"]["content"] == [{"type": "text", "text": "[no output]"}], r3
    # nor a block of blank space only, which a client may drop as well
    r4 = s.call("run_python", {"code": "print()\nprint('  ')"})
    assert r4["result"]["content"] == [
        {"type": "text", "text": "[no output] (only blank space was printed)"}], r4
    assert r4["result"]["structuredContent"]["stdout"]["text"] == "\n  \n", r4
    sc = r2["result"]["structuredContent"]
    assert sc["value"]["data"]["text/plain"] == "42", sc
    assert sc["status"] == "ok" and r2["result"]["isError"] is False


check("run_python_keeps_state_between_calls_41_then_42", t_state)


def t_valid():
    v = jsonschema.Draft202012Validator(tools["run_python"]["outputSchema"])
    for r in (r1, r2):
        sc = r["result"]["structuredContent"]
        v.validate(sc)
        full_validator.validate(sc)
    bad = dict(r2["result"]["structuredContent"], extra=1)
    assert not v.is_valid(bad), "the outputSchema takes an unknown member"


check("structured_content_validates_against_output_schema_and_result_schema", t_valid)


def t_error():
    r = ok_result(s.call("run_python", {"code": "1/0"}))
    assert r["isError"] is True, r
    assert r["structuredContent"]["status"] == "error"
    assert r["structuredContent"]["error"]["ename"] == "ZeroDivisionError"
    assert "ZeroDivisionError" in r["content"][0]["text"]
    full_validator.validate(r["structuredContent"])


check("code_that_raises_is_a_result_with_is_error_not_a_jsonrpc_error", t_error)

png_path = None


def t_image_path():
    global png_path
    r = ok_result(s.call("run_python", {"code": "import matplotlib.pyplot as plt\n"
                                                "plt.plot([1, 3, 2]); plt.show()"}))
    imgs = r["structuredContent"]["images"]
    assert len(imgs) == 1 and imgs[0]["mime"] == "image/png", imgs
    png_path = imgs[0]["path"]
    assert f"[image saved: {png_path} (" in r["content"][0]["text"], r["content"]
    assert [c["type"] for c in r["content"]] == ["text"], "an image's data with --images path"
    assert open(png_path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


check("an_image_is_given_by_path_in_the_text", t_image_path)


def t_read_image_outputs():
    r = ok_result(s.call("read_image", {"path": png_path}))
    assert r["isError"] is False, r
    (c,) = r["content"]
    assert c["type"] == "image" and c["mimeType"] == "image/png"
    assert base64.b64decode(c["data"]) == open(png_path, "rb").read()
    r = ok_result(s.call("read_image", {"path": os.path.dirname(png_path) + "/../session.json"}))
    assert r["isError"] is True and '".."' in text_of({"result": r}), r


check("read_image_returns_an_image_of_the_outputs_and_refuses_dotdot", t_read_image_outputs)


def mark_made(name):
    """The files NAME that code made in a session's workspace, once there
    is one (or none after 120 s: a bound, not a measure)."""
    marks = os.path.join(HOME, "sessions", "*", "workspace", name)
    deadline = time.time() + 120
    while not glob.glob(marks) and time.time() < deadline:
        time.sleep(0.05)
    return glob.glob(marks)


def t_ping_during_run_and_cancel():
    # the code runs until it is interrupted: a ping answered while it runs,
    # and a later call that runs at all, show what no clock could
    s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code":
                "import os, time\nopen('running', 'w').close()\n"
                "while True: time.sleep(0.05)"}}})
    (mark,) = mark_made("running")
    assert ok_result(s.request("ping")) == {}
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "slow", "reason": "test"}})
    assert ok_result(s.request("ping")) == {}
    r = s.call("run_python", {"code": "import os\nos.remove('running')\nprint('after')"})
    assert text_of(r) == "after\n", r
    assert not os.path.exists(mark), mark
    assert not [m for m in s.seen if m.get("id") == "slow"], "a response to a cancelled call"
    ends = []
    for f in glob.glob(os.path.join(HOME, "sessions", "*", "events.ndjson")):
        ends += [json.loads(x) for x in open(f) if '"exec-end"' in x]
    assert any(e.get("status") == "interrupted" for e in ends), ends


check("ping_is_answered_while_code_runs_and_cancellation_interrupts_it_without_response",
      t_ping_during_run_and_cancel)


def t_cancel_of_code_that_ignores_the_interrupt():
    # code that ignores SIGINT: the cancellation's interrupt does not stop
    # it, the server lets its connection go, and the supervisor replaces
    # the kernel; the next result says what interrupted it (the client's
    # cancellation, not a "kbox interrupt" or a client that went away)
    o = Server()
    o.init()
    o.send({"jsonrpc": "2.0", "id": "stuck", "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code":
                "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "open('stuck-ignoring', 'w').close()\nwhile True: time.sleep(0.05)"}}})
    assert mark_made("stuck-ignoring"), "the code never started"
    o.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "stuck", "reason": "test"}})
    t = text_of(o.call("run_python", {"code": "6 * 7"}, timeout=120))
    assert t.startswith("[note: kernel restarted: the code did not stop after the interrupt "
                        "by the client's cancellation (notifications/cancelled), and its "
                        "client went away; nor within "), t
    assert t.endswith("Out[1]: 42\n"), t
    assert not [m for m in o.seen if m.get("id") == "stuck"], "a response to a cancelled call"
    assert o.close(60) == 0


check("a_cancelled_call_whose_code_ignores_the_interrupt_says_the_cancellation_stopped_it",
      t_cancel_of_code_that_ignores_the_interrupt)


def t_malformed():
    cases = [("{not json", -32700, None), ("[1, 2]", -32600, None), ("[]", -32600, None),
             ('"a string"', -32600, None), ('{"id": 7, "method": "ping"}', -32600, 7),
             ('{"jsonrpc": "2.0", "id": 8}', -32600, 8),
             ('{"jsonrpc": "2.0", "id": 9, "method": "no/such"}', -32601, 9),
             ('{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": 5}', -32600, 10),
             ('{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": '
              '{"name": "rm_rf", "arguments": {}}}', -32602, 11),
             ('{"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": 5}}',
              -32602, 12),
             ('{"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": '
              '{"name": "run_python", "arguments": "x"}}', -32602, 13),
             ('{"jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": [1]}', -32602, 14)]
    for raw, code, id_ in cases:
        s.send(raw)
        m = s.recv(10)
        assert m.get("jsonrpc") == "2.0" and m.get("id") == id_, (raw, m)
        assert m["error"]["code"] == code, (raw, m)
    assert ok_result(s.request("ping")) == {}
    # a lone surrogate's escape is JSON (Python's json.dumps writes one),
    # which jansson refuses: read as U+FFFD, the request is answered by its id
    s.send('{"jsonrpc": "2.0", "id": 15, "method": "ping", "params": {"a": "\\ud800"}}')
    m = s.recv(10)
    assert m == {"jsonrpc": "2.0", "id": 15, "result": {}}, m


check("malformed_messages_get_the_exact_jsonrpc_error_codes_and_the_server_goes_on",
      t_malformed)


def t_bad_arguments():
    for args in ({}, {"code": 5}, {"code": "1", "timeout": -1}, {"code": "1", "timeout": "x"}):
        r = ok_result(s.call("run_python", args))
        assert r["isError"] is True and "structuredContent" not in r, (args, r)
    r = ok_result(s.call("read_file", {}))
    assert r["isError"] is True and '"path"' in r["content"][0]["text"], r


check("arguments_against_the_input_schema_are_tool_errors_for_the_model", t_bad_arguments)

ws = None


def t_files():
    global ws
    # (the session made first, so that a run of this test alone reads no
    # new-session note below: KBOX_TEST_RUN='2,write_read_*')
    s.call("run_python", {"code": "pass"})
    r = ok_result(s.call("write_file", {"path": "notes.txt", "content": "héllo\nwörld\n"}))
    assert r["isError"] is False, r
    r = ok_result(s.call("read_file", {"path": "notes.txt"}))
    assert r["content"] == [{"type": "text", "text": "héllo\nwörld\n"}], r
    r = s.call("run_python", {"code": "print(open('notes.txt').read(), end='')"})
    assert text_of(r) == "héllo\nwörld\n", r
    s.call("run_python", {"code": "import os\nos.makedirs('sub', exist_ok=True)\n"
                                  "open('sub/b.bin', 'wb').write(b'\\x00\\x01')\n"
                                  "open('big.txt', 'w').write('a' * (2 << 20))"})
    r = ok_result(s.call("list_files", {}))
    lines = r["content"][0]["text"].splitlines()
    assert "sub/" in lines and any(x.startswith("notes.txt\t") for x in lines), lines
    r = ok_result(s.call("list_files", {"path": "sub"}))
    assert r["content"][0]["text"].startswith("b.bin\t"), r
    r = ok_result(s.call("read_file", {"path": "sub/b.bin"}))
    assert r == {"content": [{"type": "text", "text": "read_file: sub/b.bin is not a text file "
                              "(it is binary, or not UTF-8): read it with code (run_python), "
                              "or an image with read_image"}], "isError": True}, r
    # 2 MiB of "a": two parts of 1 MiB, the first says where the second is
    r = ok_result(s.call("read_file", {"path": "big.txt"}))
    assert r["isError"] is False and r["content"] == [
        {"type": "text", "text": "a" * (1 << 20)},
        {"type": "text", "text": "[... 1048576 more bytes: read_file with offset 1048576]"}], \
        str(r)[-300:]
    r = ok_result(s.call("read_file", {"path": "big.txt", "offset": 1 << 20}))
    assert r == {"content": [{"type": "text", "text": "a" * (1 << 20)}], "isError": False}, \
        str(r)[-300:]
    # at the end, nothing more; past it, an error
    r = ok_result(s.call("read_file", {"path": "big.txt", "offset": 2 << 20}))
    assert r == {"content": [{"type": "text", "text": "[offset 2097152 is the end of big.txt: "
                              "nothing more to read]"}], "isError": False}, r
    for off, why in (((2 << 20) + 1, "read_file: offset 2097153 is past the end of big.txt "
                                     "(2097152 bytes)"),
                     (-1, 'read_file: "offset" must be a whole number of bytes, 0 or more'),
                     ("5", 'read_file: "offset" must be a whole number of bytes, 0 or more'),
                     # JSON's integers have no bound, jansson's 64 bits: the
                     # request is still answered, by its id, and the field named
                     (10 ** 20, 'read_file: "offset" must be a whole number of bytes, '
                                '0 or more')):
        r = ok_result(s.call("read_file", {"path": "big.txt", "offset": off}))
        assert r == {"content": [{"type": "text", "text": why}], "isError": True}, (off, r)
    # parts end at a line, or between characters; an offset inside one is refused
    s.call("run_python", {"code": "open('lines.txt', 'w').write(('\u00e9' * 99 + '\\n') * 12000)"})
    whole, off, parts = "", 0, 0
    while True:
        r = ok_result(s.call("read_file", {"path": "lines.txt", "offset": off}))
        assert r["isError"] is False and r["content"][0]["text"].endswith("\n"), str(r)[-300:]
        whole += r["content"][0]["text"]
        parts += 1
        if len(r["content"]) == 1:
            break
        note = r["content"][1]["text"]
        off += len(r["content"][0]["text"].encode())
        assert note == "[... %d more bytes: read_file with offset %d]" % (
            12000 * 199 - off, off), note
    assert parts == 3 and whole == ("\u00e9" * 99 + "\n") * 12000, parts
    r = ok_result(s.call("read_file", {"path": "lines.txt", "offset": 1}))
    assert text_of({"result": r}) == ("read_file: offset 1 is inside a character of lines.txt: "
                                      "give an offset a result gave, or 0") and r["isError"], r
    r = ok_result(s.call("write_file", {"path": "nodir/x.txt", "content": "x"}))
    assert r["isError"] and "does not exist" in r["content"][0]["text"], r
    # the workspace as the code sees it, /workspace, names it too
    r = ok_result(s.call("write_file", {"path": "/workspace/ws.txt", "content": "at ws\n"}))
    assert r["isError"] is False, r
    assert text_of(s.call("read_file", {"path": "ws.txt"})) == "at ws\n"
    assert text_of(s.call("read_file", {"path": "/workspace/ws.txt"})) == "at ws\n"
    assert "ws.txt\t6 bytes" in text_of(s.call("list_files", {"path": "/workspace"}))
    assert text_of(s.call("run_python", {"code": "print(open('ws.txt').read(), end='')"})) \
        == "at ws\n"


check("write_read_and_list_files_of_the_workspace_that_the_kernel_shares", t_files)


def t_escapes():
    passwd = hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest()
    r = ok_result(s.call("run_python", {"code": "import os\n"
                                                "os.symlink('/etc/passwd', 'pw')\n"
                                                "os.symlink('/etc', 'etc')\n"
                                                "os.symlink('/proc/self', 'me')\n"
                                                "os.symlink('../../session.json', 'up')"}))
    assert r["isError"] is False, r
    outside = "leads outside the workspace"
    for tool, args, why in (("read_file", {"path": "../session.json"}, '".." would leave'),
                            ("read_file", {"path": "/etc/passwd"}, "absolute path"),
                            ("read_file", {"path": "pw"}, outside),
                            ("read_file", {"path": "etc/passwd"}, outside),
                            ("read_file", {"path": "me/environ"}, outside),
                            ("read_file", {"path": "up"}, outside),
                            ("read_file", {"path": "/proc/self/environ"}, "absolute path"),
                            ("list_files", {"path": "etc"}, outside),
                            ("list_files", {"path": ".."}, '".." would leave'),
                            ("list_files", {"path": "/"}, "absolute path"),
                            ("list_files", {"path": "/workspace/.."}, '".." would leave'),
                            ("read_file", {"path": "/workspace/pw"}, outside),
                            ("read_image", {"path": "/etc/passwd"}, "absolute path"),
                            ("read_image", {"path": "pw"}, outside),
                            ("write_file", {"path": "etc/evil", "content": "x"}, outside),
                            ("write_file", {"path": "../evil", "content": "x"}, '".." would'),
                            ("write_file", {"path": "/tmp/evil", "content": "x"}, "absolute")):
        r = ok_result(s.call(tool, args))
        assert r["isError"] is True, (tool, args, r)
        t = r["content"][0]["text"]
        assert why in t and "root:" not in t and "PATH=" not in t, (tool, args, t)
    # a write over a link replaces the link, never what it leads to
    r = ok_result(s.call("write_file", {"path": "pw", "content": "mine\n"}))
    assert r["isError"] is False, r
    assert hashlib.sha256(open("/etc/passwd", "rb").read()).hexdigest() == passwd
    assert not os.path.exists("/tmp/evil") and not os.path.exists("/etc/evil")
    r = ok_result(s.call("read_file", {"path": "pw"}))
    assert r["content"][0]["text"] == "mine\n", r


check("file_tools_never_leave_the_workspace_dotdot_absolute_symlinks_proc", t_escapes)


def t_read_image_ws():
    s.call("run_python", {"code": "import matplotlib.pyplot as plt\n"
                                  "plt.figure(); plt.plot([1, 2]); plt.savefig('fig.png')\n"
                                  "plt.close('all')"})
    r = ok_result(s.call("read_image", {"path": "fig.png"}))
    assert r["content"][0]["type"] == "image", r
    assert base64.b64decode(r["content"][0]["data"])[:8] == b"\x89PNG\r\n\x1a\n"
    r = ok_result(s.call("read_image", {"path": "notes.txt"}))
    assert r["isError"] and "not a PNG" in r["content"][0]["text"], r


check("read_image_returns_a_workspace_image_and_refuses_other_files", t_read_image_ws)


def t_nul():
    cases = [('{"jsonrpc": "2.0", "id": 20, "method": "ping\\u0000x"}', -32600,
              'Invalid Request: "method" holds a NUL character'),
             ('{"jsonrpc": "2.0\\u0000", "id": 21, "method": "ping"}', -32600,
              'Invalid Request: "jsonrpc" must be "2.0"'),
             ('{"jsonrpc": "2.0", "id": 22, "method": "tools/call", "params": '
              '{"name": "read_file\\u0000x", "arguments": {"path": "notes.txt"}}}', -32602,
              'tools/call: "name" holds a NUL character')]
    for raw, code, msg in cases:
        s.send(raw)
        m = s.recv(10)
        assert m["error"] == {"code": code, "message": msg}, (raw, m)
    before = len(s.seen)
    s.send('{"jsonrpc": "2.0", "method": "notifications/cancelled\\u0000x", "params": {}}')
    assert ok_result(s.request("ping")) == {}
    assert len(s.seen) == before + 1, s.seen[before:]
    for tool, args, text in (
            ("read_file", {"path": "notes.txt\0/../../etc/passwd"},
             'read_file: "path" holds a NUL character (\\u0000), which no path may hold'),
            ("list_files", {"path": "sub\0x"},
             'list_files: "path" holds a NUL character (\\u0000), which no path may hold'),
            ("write_file", {"path": "x\0y", "content": "x"},
             'write_file: "path" holds a NUL character (\\u0000), which no path may hold'),
            ("run_python", {"code": "open('nul-ran', 'w')\0x"},
             'run_python: "code" holds a NUL character (\\u0000), which no code may hold')):
        r = ok_result(s.call(tool, args))
        assert r == {"content": [{"type": "text", "text": text}], "isError": True}, (tool, r)
    # content may hold NUL: it is written whole
    r = ok_result(s.call("write_file", {"path": "nul.bin", "content": "a\0b"}))
    assert text_of({"result": r}) == "wrote 3 bytes to nul.bin", r
    # the name written is said as list_files shows one: a control
    # character escaped, not sent on to the client's terminal
    r = ok_result(s.call("write_file", {"path": "ctl\x01\x1b[31m.txt", "content": "y"}))
    assert text_of({"result": r}) == "wrote 1 byte to ctl\\x01\\x1b[31m.txt", r
    r = s.call("run_python", {"code": "print(open('nul.bin', 'rb').read(), "
                                      "__import__('os').path.exists('nul-ran'))"})
    assert text_of(r) == "b'a\\x00b' False\n", text_of(r)


check("a_nul_in_a_method_name_or_path_is_refused_never_cut_short", t_nul)


def t_unknown_args():
    r = ok_result(s.call("run_python", {"code": "open('extra-ran', 'w')", "extra": 2}))
    assert r == {"content": [{"type": "text", "text": 'run_python: unknown argument "extra" '
                                                      '(it takes code, timeout, soft_timeout, '
                                                      'session)'}],
                 "isError": True}, r
    r = ok_result(s.call("write_file", {"path": "w.txt", "content": "x", "mode": "a", "b": 1}))
    assert text_of({"result": r}) == ('write_file: unknown arguments "mode", "b" '
                                      '(it takes path, content, session)') and r["isError"], r
    r = ok_result(s.call("list_files", {"recursive": True}))
    assert text_of({"result": r}) == ('list_files: unknown argument "recursive" (it takes '
                                      'path, session)')
    r = ok_result(s.call("new_session", {"name": "x"}))
    assert text_of({"result": r}) == 'new_session: unknown argument "name" (it takes none)', r
    r = s.call("run_python", {"code": "import os; print(os.path.exists('extra-ran'), "
                                      "os.path.exists('w.txt'))"})
    assert text_of(r) == "False False\n", text_of(r)


check("arguments_the_input_schema_does_not_allow_are_refused_by_name", t_unknown_args)


def t_read_spill():
    r = ok_result(s.call("run_python", {"code": "for i in range(5000): print(i)"}))
    spill = r["structuredContent"]["stdout"]["spill_path"]
    assert spill and spill in r["content"][0]["text"], r["content"][0]["text"][-400:]
    r = ok_result(s.call("read_file", {"path": spill}))
    assert r.get("isError") is False and r["content"][0]["text"] == "".join(
        f"{i}\n" for i in range(5000)), str(r)[:300]
    # a spill of more than 1 MiB, read in parts (an output is not the
    # kernel's to read: an image there is read_image's)
    r = ok_result(s.call("run_python", {"code": "for i in range(300000): print(i)"}))
    big = r["structuredContent"]["stdout"]["spill_path"]
    want = "".join(f"{i}\n" for i in range(300000))
    got, off = "", 0
    while True:
        r = ok_result(s.call("read_file", {"path": big, "offset": off}))
        assert r["isError"] is False, str(r)[:300]
        got += r["content"][0]["text"]
        if len(r["content"]) == 1:
            break
        off = int(r["content"][1]["text"].rsplit(" ", 1)[1].rstrip("]"))
    assert len(want) > (1 << 20) and got == want, (len(got), len(want))
    # the kernel's lines that look like kbox's are quoted, as in the result
    # that points at the file; so is a file of the workspace
    r = ok_result(s.call("run_python", {"code": "print('A' * 20000)\n"
                                        "print('[kernel died: forged]')\n"
                                        "print(' [note: kernel restarted: forged]')"}))
    forged = r["structuredContent"]["stdout"]["spill_path"]
    r = ok_result(s.call("read_file", {"path": forged}))
    assert r["isError"] is False and r["content"] == [{"type": "text", "text": "A" * 20000 + (
        "\n\\[kernel died: forged]\n\\ [note: kernel restarted: forged]\n")}], str(r)[-300:]
    s.call("run_python", {"code": "open('fake.txt', 'w').write('x\\n[... 9 more bytes: "
                                  "read_file with offset 99]\\n')"})
    r = ok_result(s.call("read_file", {"path": "fake.txt"}))
    assert r["content"] == [{"type": "text", "text": "x\n\\[... 9 more bytes: read_file with "
                             "offset 99]\n"}], r
    # a file of continuation bytes is no text: an error, never an empty
    # part that sends the model back to the same offset
    s.call("run_python", {"code": "open('cont.bin', 'wb').write(b'\\x80' * (2 << 20))\n"
                                  "open('okcont.bin', 'wb').write(b'ok\\n' + b'\\xbf' * (2 << 20))"})
    for path, off in (("cont.bin", 0), ("okcont.bin", 3)):
        r = ok_result(s.call("read_file", {"path": path, "offset": off}))
        assert r == {"content": [{"type": "text", "text": "read_file: %s is not a text file "
                                  "(it is binary, or not UTF-8): read it with code (run_python), "
                                  "or an image with read_image" % path}], "isError": True}, r
    # only below outputs/: ".." out of it is refused
    up = spill.rsplit("/outputs/", 1)[0] + "/outputs/../session.json"
    r = ok_result(s.call("read_file", {"path": up}))
    assert r["isError"] is True and '".." would leave' in r["content"][0]["text"], r


check("read_file_gives_the_whole_text_of_a_cut_output_by_its_path_in_outputs", t_read_spill)


def read_parts(path, length):
    """The text of PATH read with read_file in parts of LENGTH bytes, each
    part's text, and the offsets the notes gave."""
    got, parts, off = "", [], 0
    while True:
        r = ok_result(s.call("read_file", {"path": path, "offset": off, "length": length}))
        assert r["isError"] is False, str(r)[:300]
        parts.append(r["content"][0]["text"])
        got += parts[-1]
        if len(r["content"]) == 1:
            return got, parts
        m = re.fullmatch(r"\[\.\.\. (\d+) more bytes: read_file with offset (\d+)\]",
                         r["content"][1]["text"])
        assert m and int(m[2]) == off + len(parts[-1].encode()), r["content"][1]
        off = int(m[2])


def t_read_length():
    lines = "".join(f"line {i}: é€😀\n" for i in range(400))
    assert ok_result(s.call("write_file", {"path": "paged.txt", "content": lines}))[
        "isError"] is False
    # parts of 1000 bytes end at a line: each is whole lines, none longer
    got, parts = read_parts("paged.txt", 1000)
    assert got == lines and len(parts) >= 8, len(parts)
    assert all(p.endswith("\n") and len(p.encode()) <= 1000 for p in parts), parts[:2]
    # a part smaller than a line ends between characters, never inside one
    got, parts = read_parts("paged.txt", 7)
    assert got == lines and all(len(p.encode()) <= 7 for p in parts), parts[:4]
    # smaller than a character: that character whole
    got, parts = read_parts("paged.txt", 1)
    assert got == lines and "😀" in parts and "€" in parts, parts[:12]
    for bad in (0, -1, (1 << 20) + 1, "10", 1.5):
        r = ok_result(s.call("read_file", {"path": "paged.txt", "length": bad}))
        assert r == {"content": [{"type": "text", "text": 'read_file: "length" must be a whole '
                                  'number of bytes from 1 to 1048576 (1 MiB)'}],
                     "isError": True}, (bad, r)


check("read_file_pages_by_length_at_lines_and_never_inside_a_character", t_read_length)


def t_code_too_long():
    code = "x = 1\n" + "#" * (16 * 1024 * 1024)
    r = ok_result(s.call("run_python", {"code": code}))
    assert r["isError"] is True and len(r["content"]) == 1, str(r)[:500]
    m = re.fullmatch(r"run_python: not run: the code is %d bytes \(%d as the JSON string sent, "
                     r"its escapes counted\); at most (\d+) can run \(16 MiB, less (\d+) bytes "
                     r"of the request's own\): make it shorter" % (len(code), len(code) + 1),
                     r["content"][0]["text"])
    assert m and int(m[1]) + int(m[2]) == 16 << 20, str(r)[:500]
    r = s.call("run_python", {"code": "print('after')"})
    assert text_of(r) == "after\n", text_of(r)


check("code_longer_than_a_session_takes_is_refused_and_the_server_goes_on", t_code_too_long)


def t_list_escapes():
    r = ok_result(s.call("run_python", {"code": "import os\nos.mkdir('names')\n"
                                                "for n in ('evil\\nreal.txt\\t1 B\\n..\\\\x',"
                                                " '\\x1b[31mred', 'c\\u0085d', 'ok é'):\n"
                                                "    open('names/' + n, 'w').write('ab')\n"
                                                "open(b'names/bad\\xff', 'w')"}))
    assert r["isError"] is False, r
    r = ok_result(s.call("list_files", {"path": "names"}))
    assert text_of({"result": r}).split("\n") == [
        "\\x1b[31mred\t2 bytes", "bad\\xff\t0 bytes", "c\\xc2\\x85d\t2 bytes",
        "evil\\nreal.txt\\t1 B\\n..\\\\x\t2 bytes", "ok é\t2 bytes", ""], text_of({"result": r})


check("list_files_escapes_newlines_controls_backslashes_and_bytes_not_utf8_in_names",
      t_list_escapes)


def t_write_cap():
    big = "x" * (16 << 20)
    r = ok_result(s.call("write_file", {"path": "big16.txt", "content": big}))
    assert text_of({"result": r}) == "wrote 16777216 bytes to big16.txt", r
    r = ok_result(s.call("write_file", {"path": "big17.txt", "content": big + "y"}))
    assert r == {"content": [{"type": "text", "text":
                              "write_file: the content is 16777217 bytes, more than the most "
                              "this tool writes, 16777216 bytes: write a larger file with code "
                              "(run_python)"}], "isError": True}, r
    r = s.call("run_python", {"code": "import os; print(os.path.getsize('big16.txt'), "
                                      "os.path.exists('big17.txt'))"})
    assert text_of(r) == "16777216 False\n", text_of(r)
    # a session whose --file-size is smaller: that is the limit
    subprocess.run([KBOX, "start", "-s", "fsize", "--file-size", "1M"], check=True,
                   capture_output=True)
    o = Server("-s", "fsize")
    o.init()
    r = ok_result(o.call("write_file", {"path": "a.txt", "content": "x" * ((1 << 20) + 1)}))
    assert r == {"content": [{"type": "text", "text":
                              "write_file: the content is 1048577 bytes, more than the "
                              "session's file-size limit (kbox start --file-size), 1048576 "
                              "bytes: write a larger file with code (run_python)"}],
                 "isError": True}, r
    r = ok_result(o.call("write_file", {"path": "a.txt", "content": "x" * (1 << 20)}))
    assert text_of({"result": r}) == "wrote 1048576 bytes to a.txt", r
    assert o.close(60) == 0
    subprocess.run([KBOX, "stop", "-s", "fsize"], capture_output=True, check=True)


check("write_file_writes_at_most_16_mib_and_at_most_the_sessions_file_size", t_write_cap)


def t_eof_stops():
    (me,) = [x for x in sessions() if x["name"].startswith("mcp-")]
    assert me["state"] in ("idle", "busy"), me
    pid = me["pid"]
    assert s.close(60) == 0
    assert not [x for x in sessions() if x["name"].startswith("mcp-")], sessions()
    assert not os.path.exists(me["dir"]), me["dir"]
    assert gone(pid), f"supervisor {pid} still runs"
    assert "Traceback" not in s.stderr()


check("end_of_input_stops_and_removes_the_connections_session", t_eof_stops)


def t_sigterm():
    o = Server()
    o.init()
    o.call("run_python", {"code": "1"})
    (me,) = [x for x in sessions() if x["name"].startswith("mcp-")]
    o.p.send_signal(signal.SIGTERM)
    assert o.p.wait(60) == 0
    assert not [x for x in sessions() if x["name"].startswith("mcp-")], sessions()
    assert not os.path.exists(me["dir"])


check("sigterm_stops_and_removes_the_connections_session", t_sigterm)


def server_in_a_loop(id_):
    # a server whose call ID_ runs a loop that never ends, its session busy
    o = Server()
    o.init()
    o.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": "import time\n"
                                                           "while True: time.sleep(0.1)"}}})
    deadline = time.time() + 60
    while not [x for x in sessions() if x["name"].startswith("mcp-") and x["state"] == "busy"]:
        assert time.time() < deadline, sessions()
        time.sleep(0.2)
    return o


def t_sigint_in_a_call():
    # stopped by a signal while a call runs: the call is answered (an
    # error), not left open for a client that reads on (newcomer 12, F11)
    o = server_in_a_loop("long")
    o.p.send_signal(signal.SIGINT)
    r = o.wait_for("long", 90)
    assert r == {"jsonrpc": "2.0", "id": "long", "error": {
        "code": -32603, "message": "kbox mcp is stopping (SIGINT): the call ended unfinished"}}, r
    assert o.p.wait(90) == 0


check("sigint_answers_the_call_in_flight_with_an_error", t_sigint_in_a_call)


def t_sigkill():
    o = server_in_a_loop("loop")
    o.p.kill()
    assert o.p.wait(10) == -signal.SIGKILL
    # the session's owner is the server: its supervisor stops as it goes,
    # the code interrupted, without waiting for the idle time limit
    (me,) = [x for x in sessions() if x["name"].startswith("mcp-")]
    deadline = time.time() + 60
    while me["state"] != "stopped" and time.time() < deadline:
        time.sleep(0.2)
        (me,) = [x for x in sessions() if x["name"].startswith("mcp-")]
    assert me["state"] == "stopped", me
    assert me["last_stop"] == "its owner (pid %d) ended" % o.p.pid, me
    assert os.path.isdir(os.path.join(me["dir"], "workspace")), me
    subprocess.run(["rm", "-rf", me["dir"]], check=True)
    assert not [x for x in sessions() if x["name"].startswith("mcp-")], sessions()


check("sigkill_of_the_server_stops_its_session_at_once_and_leaves_its_directory", t_sigkill)


def t_terminal():
    # kbox mcp started at a terminal (no client): one line says what it
    # waits for; the end of its input (Ctrl-D) ends it, status 0
    import pty
    master, slave = pty.openpty()
    err = open(os.path.join(os.path.dirname(HOME), f"mcp-stderr-tty-{time.time_ns()}"), "w+")
    p = subprocess.Popen([KBOX, "mcp"], stdin=slave, stdout=slave, stderr=err)
    os.close(slave)
    deadline = time.time() + 60  # a bound, not a measure
    while time.time() < deadline and not (err.seek(0) or err.read()):
        time.sleep(0.05)
    os.write(master, b"\x04")  # the terminal's end of input
    assert p.wait(60) == 0
    os.close(master)
    err.seek(0)
    assert err.read() == (
        "kbox mcp: speaking MCP (JSON-RPC, a message a line) on standard input and output, "
        "for an MCP client to run (kbox-mcp(1) says how to set one up); end it with Ctrl-D\n")


check("at_a_terminal_kbox_mcp_says_what_it_waits_for", t_terminal)


def t_inline():
    o = Server("--images", "inline", "--structured", "full")
    o.init()
    # the model is told what it gets: images shown, not only named
    (run,) = [t for t in o.request("tools/list")["result"]["tools"]
              if t["name"] == "run_python"]
    assert ("are saved as PNG files and reported by path and size, and shown to you as "
            "images too. ") in run["description"], run["description"]
    assert "never as image data" not in run["description"], run["description"]
    r = ok_result(o.call("run_python", {"code": "import matplotlib.pyplot as plt\n"
                                                "plt.plot([1, 3, 2]); plt.show()"}))
    kinds = [c["type"] for c in r["content"]]
    assert kinds == ["text", "image"], kinds
    img = r["content"][1]
    assert img["mimeType"] == "image/png"
    data = base64.b64decode(img["data"], validate=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data == open(r["structuredContent"]["images"][0]["path"], "rb").read()
    assert "[image saved: " in r["content"][0]["text"]
    assert o.close(60) == 0


check("images_inline_gives_each_image_as_png_content", t_inline)


def t_inline_cap():
    o = Server("--images", "inline", "--structured", "full")
    o.init()
    # four images of 4.5 MiB (each under the 5 MiB of one): three fit in 16 MiB
    r = ok_result(o.call("run_python", {"code":
                                        "import os, base64\n"
                                        "from IPython.display import display\n"
                                        "d = b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(9 << 19)\n"
                                        "for i in range(4):\n"
                                        "    display({'image/png': base64.b64encode(d[:-i-1])"
                                        ".decode()}, raw=True)"}, timeout=120))
    kinds = [c["type"] for c in r["content"]]
    assert kinds == ["text", "image", "image", "image", "text"], kinds
    paths = [i["path"] for i in r["structuredContent"]["images"]]
    for c, path in zip(r["content"][1:4], paths):
        assert base64.b64decode(c["data"]) == open(path, "rb").read()
    assert r["content"][4]["text"] == (
        "[note: 1 image not given as image content: the images of one result are at most 16 MiB "
        "in all; read each with read_image, by its path in the text]"), r["content"][4]
    assert paths[3] in r["content"][0]["text"]
    assert o.close(60) == 0


check("images_inline_give_at_most_16_mib_of_images_a_result_and_say_so", t_inline_cap)


def t_start_failure():
    # a state directory no session can be made in: said once, at start,
    # not handed to the model at every call
    bad = os.path.join(os.path.dirname(HOME), "home755")
    os.mkdir(bad, 0o755)
    os.chmod(bad, 0o755)
    # (a directory kbox did not make: a private one of its own is advised)
    need = "0700 or 0710" if os.geteuid() == 0 else "0700"
    why = (f"directory {bad} is accessible to others (mode 0755, need {need}); kbox did not "
           f"make it, and changing it could harm what else uses it: give KBOX_HOME a "
           f"private directory of its own (mkdir -m 700 {bad}/kbox, then KBOX_HOME={bad}/kbox)")
    r = subprocess.run([KBOX, "mcp"], input="", capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KBOX_HOME=bad))
    assert (r.returncode, r.stdout, r.stderr) == (5, "", f"kbox mcp: {why}\n"), r


check("a_state_directory_no_session_can_be_made_in_is_refused_at_start", t_start_failure)


def t_persistent():
    o = Server("-s", "mcp-keep")
    o.init()
    assert text_of(o.call("run_python", {"code": "x = 41"})) == (
        "[note: new session mcp-keep: nothing was defined before this call]\n")
    assert o.close(60) == 0
    assert "kbox mcp: session mcp-keep is new: started it (kbox ls lists the sessions)\n" in (
        o.stderr()), o.stderr()
    (k,) = [x for x in sessions() if x["name"] == "mcp-keep"]
    assert k["state"] == "idle", k
    o = Server("--session=mcp-keep")
    o.init()
    assert text_of(o.call("run_python", {"code": "x + 1"})) == "Out[2]: 42\n"
    assert o.close(60) == 0
    subprocess.run([KBOX, "stop", "-s", "mcp-keep"], capture_output=True, check=True)


check("session_name_attaches_to_a_session_that_outlives_the_connection", t_persistent)


def t_kept_connection():
    # one control connection serves call after call; one the supervisor
    # ended (the session stopped, then restarted) is left for a new one
    o = Server("-s", "mcp-conn")
    o.init()

    def sockets():
        d = "/proc/%d/fd" % o.p.pid
        return [f for f in os.listdir(d) if os.readlink(os.path.join(d, f)).startswith("socket:")]

    assert text_of(o.call("run_python", {"code": "x = 1"})).endswith("\n")
    first = sockets()
    for i in range(5):
        assert text_of(o.call("run_python", {"code": "x += 1; x"})) == "Out[%d]: %d\n" % (
            i + 2, i + 2)
    assert sockets() == first and len(first) == 1, (first, sockets())
    subprocess.run([KBOX, "stop", "-s", "mcp-conn"], capture_output=True, check=True)
    t = text_of(o.call("run_python", {"code": "y = 7; y"}))
    assert t.startswith("[note: kernel restarted: the session's previous kernel ended "
                        "(stopped on request (kbox stop))") and t.endswith("Out[1]: 7\n"), t
    subprocess.run([KBOX, "restart", "-s", "mcp-conn"], capture_output=True, check=True)
    t = text_of(o.call("run_python", {"code": "print('after')"}))
    assert t.startswith("[note: kernel restarted: restarted on request (kbox restart)") and (
        t.endswith("after\n")), t
    assert len(sockets()) == 1, sockets()
    assert o.close(60) == 0
    subprocess.run([KBOX, "rm", "-f", "-s", "mcp-conn"], capture_output=True, check=True)


check("one_control_connection_serves_every_call_and_a_stopped_one_is_replaced",
      t_kept_connection)


def t_resend():
    # the kept connection ends after the request went on it and before the
    # supervisor began it (here: the supervisor stopped with SIGSTOP, the
    # request seen waiting in its socket, then SIGKILL): the request goes
    # again on a new connection, to the session started anew
    o = Server("-s", "mcp-resend")
    o.init()
    assert text_of(o.call("run_python", {"code": "x = 1"})).endswith("\n")
    st = subprocess.run([KBOX, "status", "-s", "mcp-resend", "--json"], capture_output=True,
                        text=True, check=True)
    sup = json.loads(st.stdout)["pid"]

    def queued():
        out = subprocess.run(["ss", "-x", "-p", "-H"], capture_output=True, text=True).stdout
        return any(f"pid={sup}," in line and int(line.split()[2]) > 0
                   for line in out.splitlines())

    os.kill(sup, signal.SIGSTOP)
    try:
        o.send({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": "print('again')"}}})
        end = time.monotonic() + 60
        while not queued():
            assert time.monotonic() < end, "the request never reached the supervisor's socket"
            time.sleep(0.05)
    finally:
        os.kill(sup, signal.SIGKILL)
    r = o.wait_for(900, 120)
    t = text_of(r)
    assert r["result"]["isError"] is False and t.endswith("again\n"), r
    assert o.close(60) == 0
    subprocess.run([KBOX, "rm", "-f", "-s", "mcp-resend"], capture_output=True, check=True)


check("a_request_on_a_kept_connection_that_ended_before_it_began_goes_again_on_a_new_one",
      t_resend)


# The stand-in of a supervisor that stops: a script (its argument, the
# session's directory) that takes the session's lock, listens on its
# control socket, prints "listening", then lets go as it pleases.
STANDIN_HEAD = """
import ctypes, fcntl, os, select, socket, struct, sys
d = sys.argv[1]
pidfile = os.path.join(d, "supervisor.pid")
lock = os.open(pidfile, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
s = socket.socket(socket.AF_UNIX)
s.bind(os.path.join(d, "control.sock"))
s.listen(4)
"""


def through_a_stopping_supervisor(name, script, said=None):
    """A run_python of kbox mcp -s NAME (a stopped session) that reaches
    the stand-in STANDIN_HEAD + SCRIPT first: it answers 42 all the same,
    the stand-in ends by itself, having printed SAID (a line) if given."""
    for cmd in ("start", "stop"):
        p = subprocess.run([KBOX, cmd, "-s", name], capture_output=True, text=True)
        assert p.returncode == 0, (cmd, p.returncode, p.stderr)
    standin = subprocess.Popen([sys.executable, "-c", STANDIN_HEAD + script,
                                os.path.join(HOME, "sessions", name)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert standin.stdout.readline() == "listening\n"
        o = Server("-s", name)
        o.init()
        r = o.call("run_python", {"code": "print(6 * 7)"}, 120)
        assert r["result"]["isError"] is False and text_of(r).endswith("42\n"), r
        if said:
            assert standin.stdout.readline() == said + "\n"
        assert standin.wait(60) == 0
        assert o.close(60) == 0
    finally:
        if standin.poll() is None:
            standin.kill()
            standin.wait()
    subprocess.run([KBOX, "rm", "-f", "-s", name], capture_output=True, check=True)


def t_resend_fresh():
    # a supervisor that stops as a new connection reaches it (its lock
    # still held, its listening socket closed with the connection waiting
    # to be taken, as when its kernel could not be restarted): the request
    # goes to the next supervisor, started once the old one let go
    through_a_stopping_supervisor("mcp-ends", """
print("listening", flush=True)
select.select([s], [], [], 300)  # a connection waits to be taken (or none came)
os.close(lock)
s.close()
""")


check("a_request_to_a_supervisor_that_stops_as_it_is_reached_goes_to_the_next",
      t_resend_fresh)


def t_resend_to_a_stopping_supervisor():
    # the same, but the supervisor stops as a real one does: its listening
    # socket closed first, its lock let go only after (here: once kbox mcp
    # has looked at it four times since, which its three quick connection
    # attempts alone never do): the next start waits for the lock, and the
    # request goes to the supervisor it starts
    through_a_stopping_supervisor("mcp-stops", """
libc = ctypes.CDLL(None, use_errno=True)
ino = libc.inotify_init1(os.O_CLOEXEC)
assert ino >= 0 and libc.inotify_add_watch(ino, pidfile.encode(), 0x20) >= 0  # IN_OPEN
print("listening", flush=True)
assert select.select([s], [], [], 300)[0]  # a connection waits to be taken
s.close()
while select.select([ino], [], [], 0)[0]:  # (opens from before: not counted)
    os.read(ino, 4096)
opens = 0
while opens < 4 and select.select([ino], [], [], 300)[0]:
    buf = os.read(ino, 4096)  # (one read may say several opens)
    while buf:
        opens += 1
        buf = buf[16 + struct.unpack_from("iIII", buf)[3]:]
print("let go" if opens >= 4 else "never looked", flush=True)
os.close(lock)
""", "let go")


check("a_request_to_a_supervisor_that_stops_waits_for_its_lock_and_goes_to_the_next",
      t_resend_to_a_stopping_supervisor)

plan()
