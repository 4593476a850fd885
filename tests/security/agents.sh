#!/bin/bash
# tests/security/agents.sh — threats.md rows 37, 38 and 47, the ways in for
# agents.  Row 37: kbox mcp's file tools, driven by a model or client of
# its choosing, never reach past the session's workspace, whatever links
# the kernel's code made in it.  Row 38: kbox agent's API key is out of
# the sandbox's reach: kernel code searching its environment, every
# process it can see and every file it can read finds nothing (a control
# session with the key in its workspace shows that the search finds it
# where it is).  Row 47: no secret of the caller's environment reaches
# the supervisor that kbox mcp, start, exec or run starts, nor its kernel.
# Each test is named after its row.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir (or KBOX),
# KERNEL_PYTHON.  Run by hand (as root and as a user):
#   KBOX=/path/to/build/kbox bash tests/security/agents.sh
# shellcheck disable=SC2016,SC2034 # eval strings expand later, using these variables
set -u
[ -n "${BASH_VERSION-}" ] || exec bash "$0" "$@"

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/lib.sh
ROOT_TAG=ksa
. "$(dirname "$0")/../lib.sh"

cd "$W" || exit 1
sandbox_or_skip

# Row 47: every session of this file is started (by kbox mcp, kbox start,
# kbox exec, kbox run) with these in the caller's environment, and none
# may reach a supervisor or a kernel.
export OPENAI_API_KEY=sk-test-secret ANTHROPIC_API_KEY=sk-ant-test-secret FOO_TOKEN=foo-test-token
# secrets_of PID: the lines of /proc/PID/environ that hold one of them,
# "none", or "gone" when there is no such process
secrets_of() {
	[ -n "$1" ] && [ -r "/proc/$1/environ" ] || {
		echo gone
		return
	}
	found=$(tr '\0' '\n' <"/proc/$1/environ" |
		grep -E '^(OPENAI_API_KEY|ANTHROPIC_API_KEY|FOO_TOKEN)=|test-secret|foo-test-token')
	echo "${found:-none}"
}
# sup_secrets NAME: secrets_of session NAME's supervisor
sup_secrets() { secrets_of "$(cat "$S/$1/supervisor.pid" 2>/dev/null)"; }
# what the kernel has of them: "KENV []" when nothing
KENV='import os
print("KENV", sorted(k for k, v in os.environ.items()
                     if k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FOO_TOKEN")
                     or "test-secret" in v or "foo-test-token" in v))'

# ---- row 37: the MCP file tools stay in the workspace ----

# Kernel code plants links out of the workspace (a file, a directory, /
# itself, /proc, the session's own files above it); a client then asks
# for each through every file tool.  Each call must be refused
# (isError), and /etc/passwd and the session's files stay as they were.
if [ -z "$SKIPPING" ]; then
	sum_before=$(sha256sum /etc/passwd)
	timeout -k 5 120 "$PY" - "$KBOX" >"$W/mcp.out" 2>"$W/mcp.err" <<'PYEOF'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp", "-s", "r37"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
n = 0
def call(method, params=None):
    global n
    n += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                              "params": params or {}}) + "\n")
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == n:
            return m
def tool(name, **args):
    r = call("tools/call", {"name": name, "arguments": args})["result"]
    return r.get("isError", False), " ".join(c.get("text", "") for c in r["content"])
call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "row37", "version": "1"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
err, text = tool("run_python", code="""
import os
os.symlink("/etc/passwd", "passwd")
os.symlink("/etc", "etc")
os.symlink("/", "root")
os.symlink("/proc/self/root/etc/passwd", "procpasswd")
os.symlink("..", "up")
os.symlink("../session.json", "session")
os.mkdir("d"); os.symlink("../../..", "d/far")
print("planted")
""")
print("plant", err, text.strip().splitlines()[-1])  # after the new session's note
for name, args in [("read_file", "passwd"), ("read_file", "etc/passwd"),
                   ("read_file", "root/etc/passwd"), ("read_file", "procpasswd"),
                   ("read_file", "up/session.json"), ("read_file", "session"),
                   ("read_file", "d/far/etc/passwd"), ("read_file", "../session.json"),
                   ("read_file", "/etc/passwd"), ("read_file", "/proc/self/environ"),
                   ("list_files", "etc"), ("list_files", "root"), ("list_files", "up"),
                   ("list_files", "/"), ("read_image", "root/usr/share/pixmaps/debian-logo.png"),
                   ("read_image", "/etc/passwd"), ("write_file", "etc/kbox-row37"),
                   ("write_file", "up/kbox-row37"), ("write_file", "d/far/tmp/kbox-row37"),
                   ("write_file", "../kbox-row37")]:
    a = {"path": args}
    if name == "write_file":
        a["content"] = "x"
    err, text = tool(name, **a)
    print("call", name, args, "refused" if err else "ALLOWED: " + text[:80])
# writing over the link to /etc/passwd replaces the link, not the file
err, text = tool("write_file", path="passwd", content="mine\n")
print("over_link", err, tool("read_file", path="passwd")[1].strip())
p.stdin.close()
p.wait(60)
PYEOF
	rc=$?
	sum_after=$(sha256sum /etc/passwd)
	env_mcp=$(sup_secrets r37)
	"$KBOX" stop -s r37 >/dev/null 2>&1
fi
check row37_kernel_code_plants_links_out_of_the_workspace eval '[ "$rc" = 0 ] &&
	grep -qx "plant False planted" "$W/mcp.out"'
check row37_every_file_tool_refuses_every_path_out_of_the_workspace eval '
	[ "$(grep -c "^call .* refused$" "$W/mcp.out")" = 20 ] && ! grep -q ALLOWED "$W/mcp.out"'
check row37_write_file_over_a_link_replaces_the_link_only eval '
	grep -qx "over_link False mine" "$W/mcp.out" && [ "$sum_before" = "$sum_after" ] &&
	[ ! -e /etc/kbox-row37 ] && [ ! -e /tmp/kbox-row37 ] && [ ! -e "$S/kbox-row37" ]'

# Kernel code plants, at the names the temporary files of write_file
# and kbox put were given before (.kbox-mcp-PID, .kbox-put-PID, the PIDs
# known here), a FIFO in the workspace's top (an open of it would wait for
# a reader for ever) and a link to /etc/passwd in sub/.  Each write still
# works at once, the server answers a ping sent right after it, and what
# was planted is left as it was.
# (kbox start starts its session, so that row 47 sees that one too)
kx start -s r37f
env_start=$(sup_secrets r37f)
if [ -z "$SKIPPING" ]; then
	printf 'from put\n' >"$W/put.txt"
	sum_before=$(sha256sum /etc/passwd)
	timeout -k 5 120 "$PY" - "$KBOX" "$W/put.txt" >"$W/fifo.out" 2>"$W/fifo.err" <<'PYEOF'
import json, os, select, subprocess, sys, time
kbox, host = sys.argv[1], sys.argv[2]
def held(*argv):
    """A process that runs ARGV once released: its PID is known before."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os.execv(argv[0], list(argv))
    os.close(r)
    return pid, w
put_top = held(kbox, "put", "-s", "r37f", host, "put.txt")
put_sub = held(kbox, "put", "-s", "r37f", host, "sub/")
p = subprocess.Popen([kbox, "mcp", "-s", "r37f"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
buf = b""
def recv(id_, wait):
    global buf
    deadline = time.time() + wait
    while True:
        while b"\n" not in buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
                return None
            buf += os.read(p.stdout.fileno(), 1 << 20)
        line, buf = buf.split(b"\n", 1)
        m = json.loads(line)
        if m.get("id") == id_:
            return m
def send(id_, method, params):
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                              "params": params}).encode() + b"\n")
    p.stdin.flush()
def tool(id_, name, **args):
    send(id_, "tools/call", {"name": name, "arguments": args})
send(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "row37", "version": "1"}})
recv(1, 30)
tool(2, "run_python", code="""
import os, stat
os.mkdir("sub")
for pid in (%d, %d, %d):
    for kind in ("mcp", "put"):
        os.mkfifo(".kbox-%%s-%%d" %% (kind, pid))
        os.symlink("/etc/passwd", "sub/.kbox-%%s-%%d" %% (kind, pid))
print("planted", len(os.listdir(".")) - 1, len(os.listdir("sub")))
""" % (p.pid, put_top[0], put_sub[0]))
r = recv(2, 60)
print("plant", r["result"]["content"][0]["text"].strip())
for id_, path in ((3, "notes.txt"), (5, "sub/notes.txt")):
    tool(id_, "write_file", path=path, content="mine\n")
    send(id_ + 1, "ping", {})
    # a write held by a planted FIFO never answers: 60 s is a hang's bound
    w, ping = recv(id_, 60), recv(id_ + 1, 60)
    print("write", path, "hang" if w is None else w["result"]["isError"],
          "ping" if ping and ping.get("result") == {} else "no-ping")
for pid, w in (put_top, put_sub):
    os.write(w, b"x")
    deadline = time.time() + 20
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        status = -1
    print("put", pid == put_top[0] and "top" or "sub", os.waitstatus_to_exitcode(status)
          if status >= 0 else "hang")
tool(7, "run_python", code="""
import os, stat
kinds = sorted(set("fifo" if stat.S_ISFIFO(os.lstat(n).st_mode) else
                   "link" if os.path.islink(n) else "other"
                   for d in (".", "sub") for n in (os.path.join(d, x) for x in os.listdir(d))
                   if os.path.basename(n).startswith(".kbox-")))
print("left", kinds, len([x for x in os.listdir(".") if x.startswith(".kbox-")]),
      len([x for x in os.listdir("sub") if x.startswith(".kbox-")]),
      open("notes.txt").read() == "mine\\n" == open("sub/notes.txt").read(),
      open("put.txt").read() == "from put\\n" == open("sub/put.txt").read())
""")
print(recv(7, 60)["result"]["content"][0]["text"].strip())
p.stdin.close()
p.wait(60)
PYEOF
	rc=$?
	sum_after=$(sha256sum /etc/passwd)
	"$KBOX" stop -s r37f >/dev/null 2>&1
fi
check row37_fifos_and_links_at_the_old_temporary_names_are_planted eval '[ "$rc" = 0 ] &&
	grep -qx "plant planted 6 6" "$W/fifo.out"'
check row37_write_file_is_neither_held_nor_refused_by_them eval '
	grep -qx "write notes.txt False ping" "$W/fifo.out" &&
	grep -qx "write sub/notes.txt False ping" "$W/fifo.out"'
check row37_kbox_put_is_neither_held_nor_refused_by_them eval '
	grep -qx "put top 0" "$W/fifo.out" && grep -qx "put sub 0" "$W/fifo.out"'
check row37_what_was_planted_is_left_and_the_files_are_written eval '
	grep -qx "left \[.fifo., .link.\] 6 6 True True" "$W/fifo.out" &&
	[ "$sum_before" = "$sum_after" ]'

# ---- row 38: the API key is out of the sandbox's reach ----

KEY=sk-kboxsec-Zq81-UNIQ
# what kernel code searches: its environment, the environment and command
# line of every process it sees, and every file up to 4 MiB it can read
# outside /usr, /sys and /proc (whose per-process files were read);
# the key is put together at run time, so that the code holds it nowhere
SEARCH='import os
needle = ("sk-kboxsec-" + "Zq81-UNIQ").encode()
hits = [k for k, v in os.environ.items() if needle in (k + "=" + v).encode()]
for pid in [d for d in os.listdir("/proc") if d.isdigit()]:
    for f in ("environ", "cmdline"):
        try:
            if needle in open(f"/proc/{pid}/{f}", "rb").read():
                hits.append(f"/proc/{pid}/{f}")
        except OSError:
            pass
for top in sorted(set(os.listdir("/")) - {"usr", "sys", "proc", "dev"}):
    if os.path.islink("/" + top):
        continue
    for d, dirs, files in os.walk("/" + top):
        for name in files:
            path = os.path.join(d, name)
            try:
                if (os.path.isfile(path) and not os.path.islink(path)
                        and os.path.getsize(path) < 4 << 20 and needle in open(path, "rb").read()):
                    hits.append(path)
            except OSError:
                pass
print("KEYSEARCH", "clean" if not hits else "found " + " ".join(hits))'

# the control: the key in a file of the workspace is found there
printf 'key=%s\n' "$KEY" >"$W/leak.txt"
# (kbox exec starts this session, and row 47 reads what its kernel has)
kx exec -s ctl38 "$KENV"
keep kenv_exec
env_exec=$(sup_secrets ctl38)
kx put -s ctl38 "$W/leak.txt"
kx exec -s ctl38 "$SEARCH"
keep ctl
check row38_the_search_finds_the_key_where_it_is eval '[ "$rc" = 0 ] &&
	[ "$(cat "$W/out")" = "KEYSEARCH found /workspace/leak.txt" ]'

# the agent: its tool call runs the search; the fake API checks the key
# on every request, and that the tool message says "clean"
if [ -z "$SKIPPING" ]; then
	"$PY" -c 'import json, sys; print(json.dumps({"key": sys.argv[1], "model": "m", "replies": [
	    {"tool": sys.argv[2]},
	    {"answer": "done", "last_tool_contains": "KEYSEARCH clean"}]}))' "$KEY" "$SEARCH" >"$W/script.json"
	"$PY" "$top_srcdir/tests/fake_openai.py" "$W/script.json" "$W/port" "$W/api.log" 2>"$W/api.err" &
	BG_PIDS="$BG_PIDS $!"
	wait_for test -s "$W/port"
	KBOX_API_KEY=$KEY timeout -k 5 120 "$KBOX" agent -s r38 -m m \
		--base-url "http://127.0.0.1:$(cat "$W/port")/v1" "find it" >"$W/out" 2>"$W/err" </dev/null
	rc=$?
	"$KBOX" stop -s r38 >/dev/null 2>&1
fi
check row38_kernel_code_finds_the_api_key_nowhere eval '[ "$rc" = 0 ] &&
	[ "$(cat "$W/out")" = done ] && grep -q "KEYSEARCH clean" "$W/api.log" &&
	! grep -q "KEYSEARCH found" "$W/api.log"'
check row38_the_key_is_in_no_file_of_the_session eval '[ -d "$S/r38" ] &&
	! grep -rqF "$KEY" "$S/r38" 2>/dev/null && ! grep -qF "$KEY" "$W/err"'

# ---- row 47: no secret of the caller's in a supervisor's environment ----

# kbox run's session is private: its cell says when it runs, and waits
# for the test to have read the supervisor's environment (found by the
# workspace its session.json names)
if [ -z "$SKIPPING" ]; then
	mkdir "$ROOT/ws47" && chmod 777 "$ROOT/ws47"
	(
		timeout -k 5 120 "$KBOX" run --workspace "$ROOT/ws47" -c "$KENV
import os, time
open('started', 'w').close()
while not os.path.exists('go'):
    time.sleep(0.05)" >"$W/run47.out" 2>"$W/run47.err" </dev/null
		echo $? >"$W/run47.rc"
	) &
	BG_PIDS="$BG_PIDS $!"
	wait_for test -e "$ROOT/ws47/started"
	run47=$(grep -lF "$ROOT/ws47" /tmp/kbox-run-*/session.json \
		${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR"/kbox-run-*/session.json} 2>/dev/null | head -n 1)
	env_run=$(secrets_of "$(cat "${run47%/session.json}/supervisor.pid" 2>/dev/null)")
	touch "$ROOT/ws47/go"
	wait_for test -s "$W/run47.rc"
fi
check row47_a_supervisor_kbox_mcp_started_has_no_secret_of_the_caller eq "${env_mcp-}" none
check row47_a_supervisor_kbox_start_started_has_no_secret_of_the_caller eq "${env_start-}" none
check row47_a_supervisor_kbox_exec_started_has_no_secret_of_the_caller eq "${env_exec-}" none
DIAG=run47
check row47_a_supervisor_kbox_run_started_has_no_secret_of_the_caller eval '[ -n "${run47-}" ] &&
	eq "$env_run" none'
check row47_the_kernels_have_no_secret_of_the_caller eval 'rc_is kenv_exec 0 &&
	out_is kenv_exec "[note: new session ctl38: nothing was defined before this call]
KENV []" && [ "$(cat "$W/run47.rc")" = 0 ] &&
	[ "$(head -n 1 "$W/run47.out")" = "KENV []" ]'
DIAG=

# ---- row 53: kbox mcp --http, reachable by anything that can connect ----

# Another local user, a web page through a name it rebinds to 127.0.0.1,
# or a process that read the environment: no request without the bearer
# token, none whose Host or Origin is not the server's, and the token in
# no process's environment (the server wipes it; conversations never get
# it).
token53=tok53-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
if [ -z "$SKIPPING" ]; then
	# (timeout's -k counts from our SIGTERM too: the server's end, its
	# conversations' sessions stopped, may take a while on a loaded
	# machine under the sanitizers; --foreground: as in tests/lib.sh's
	# http_relay)
	KBOX_MCP_TOKEN=$token53 timeout --foreground -k 120 300 "$KBOX" mcp --http 127.0.0.1:0 >/dev/null \
		2>"$W/http53.err" &
	http53=$!
	BG_PIDS="$BG_PIDS $http53"
	wait_for grep -q "^kbox mcp: listening on http://127.0.0.1:[0-9]*/mcp$" "$W/http53.err"
	port53=$(sed -n 's|^kbox mcp: listening on http://127.0.0.1:\([0-9]*\)/mcp$|\1|p' "$W/http53.err")
	"$PY" - "$port53" "$token53" >"$W/http53.out" 2>&1 <<'PYEOF'
import json, sys, urllib.request, urllib.error
port, token = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}/mcp"
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "row53", "version": "1"}}}).encode()
def post(headers):
    h = {"Content-Type": "application/json", "Accept": "application/json"}
    h.update(headers)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, init, h), timeout=60) as r:
            return r.status, r.headers.get("Mcp-Session-Id")
    except urllib.error.HTTPError as e:
        return e.code, None
ok = "Bearer " + token
print("none", post({})[0])
print("wrong", post({"Authorization": "Bearer x" + token[1:]})[0])
print("host", post({"Authorization": ok, "Host": "attacker.example"})[0])
print("origin", post({"Authorization": ok, "Origin": "http://attacker.example"})[0])
st, sid = post({"Authorization": ok})
print("token", st, bool(sid))
# one of each: two Origins, the second another site's, or two tokens
import http.client
def twice(name, values):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    c.putrequest("POST", "/mcp")
    for k, v in [("Content-Type", "application/json"), ("Accept", "application/json")] + \
            ([] if name == "Authorization" else [("Authorization", ok)]):
        c.putheader(k, v)
    for v in values:
        c.putheader(name, v)
    c.putheader("Content-Length", str(len(init)))
    c.endheaders(init)
    r = c.getresponse()
    r.read()
    return r.status
print("two-origins", twice("Origin", [f"http://127.0.0.1:{port}", "http://attacker.example"]))
print("two-tokens", twice("Authorization", [ok, "Bearer x"]))
# a string id with a NUL comes back as it was sent
nul = json.dumps({"jsonrpc": "2.0", "id": "a\u0000b", "method": "initialize",
                  "params": json.loads(init)["params"]}).encode()
with urllib.request.urlopen(urllib.request.Request(url, nul, {
        "Content-Type": "application/json", "Accept": "application/json",
        "Authorization": ok}), timeout=60) as r:
    print("nul-id", r.status, json.loads(r.read())["id"] == "a\x00b")
PYEOF
	env53=none
	seen53=0
	# the server and the conversation's kbox mcp (not timeout, which the
	# shell gave the token; kbox execs the server in its own place)
	for p in $(pgrep -f "kbox-mcp-http --listen 127.0.0.1:0") $(pgrep -f "^kbox mcp --images"); do
		[ -r "/proc/$p/environ" ] && seen53=$((seen53 + 1))
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qF "$token53" && env53=$p
	done
	kill -TERM "$http53"
	wait "$http53"
	echo $? >"$W/http53.rc"
fi
DIAG=http53
check row53_kbox_mcp_http_refuses_requests_without_the_token_or_of_another_host_or_origin \
	eval '[ "$(cat "$W/http53.out")" = "none 401
wrong 401
host 403
origin 403
token 200 True
two-origins 400
two-tokens 400
nul-id 200 True" ]'
check row53_kbox_mcp_http_keeps_its_token_in_no_environment eval '[ "${env53-}" = none ] &&
	[ "${seen53-0}" -ge 2 ] &&
	[ "$(cat "$W/http53.rc")" = 0 ]'
DIAG=

tests_done
