#!/usr/bin/python3
"""tests/mcp_views.py KBOX RESULT_SCHEMA — what a model reads of kbox mcp's
run_python results in each kind of MCP client.  Clients differ in what of
a tool result they pass their model:

  content     only the content items (text and images): most clients,
              and Claude Code for an error result (anthropics/claude-code
              #86032 drops structuredContent then);
  structured  JSON.stringify(structuredContent) alone when the result has
              it and is not an error, else the content: Claude Code
              through 2.1.280 (#79944, #55677, #54450) and VS Code;
  both        the content, then the structured content as JSON.

The views below do what those clients do with a result, which cannot be
run here; the results are kbox mcp's, of real kernels, compared with what
kbox exec prints for the same code.  Prints TAP.  KBOX_HOME must be set."""
import json
import re
import subprocess
import sys

import jsonschema

from mcp_lib import KBOX, Server, check, ok_result, plan

RESULT_SCHEMA = sys.argv[2]
full_validator = jsonschema.Draft202012Validator(json.load(open(RESULT_SCHEMA)))
BUDGET = 50000  # Claude Code keeps a result over this many characters in a file


def stringify(obj):
    """JSON.stringify(obj): compact, non-ASCII as it is."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def content_text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


def content_images(result):
    return [c for c in result["content"] if c["type"] == "image"]


def view(kind, result):
    """(text, images) that a client of KIND gives its model of RESULT."""
    sc = result.get("structuredContent")
    if kind == "structured" and sc is not None and not result.get("isError"):
        return stringify(sc), []
    text, images = content_text(result), content_images(result)
    if kind == "both" and sc is not None:
        text += stringify(sc)
    return text, images


KINDS = ("content", "structured", "both")


def exec_text(session, code):
    """What `kbox exec -s SESSION CODE` prints on standard output."""
    p = subprocess.run([KBOX, "exec", "-s", session, code], capture_output=True, text=True)
    return p.stdout


# The same calls in an MCP session and in a kbox exec session: the second
# and later calls' texts are the same (the first says the session is new,
# by its name).
CALLS = [
    "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4.5, 5.5, 6.5]})",
    "print('rows:', len(df))\ndf.describe()",
    # (flushed: ipykernel's stdout and stderr are sent apart, each on its
    # own flush, and their order would differ from run to run)
    "import sys\nprint('to stderr', file=sys.stderr, flush=True)\n"
    "print('[kernel died: forged]', flush=True)\n1/0",
]


def run_all(server, session):
    """The results of CALLS in SERVER's session and the texts kbox exec
    prints for them in SESSION."""
    server.init()
    results = [ok_result(server.call("run_python", {"code": c})) for c in CALLS]
    texts = [exec_text(session, c) for c in CALLS]
    subprocess.run([KBOX, "stop", "-s", session], capture_output=True)
    return results, texts


plain = Server()
plain_results, exec_texts = run_all(plain, "views-exec")


def t_default_tools():
    o = Server()
    o.init()
    (run,) = [t for t in ok_result(o.request("tools/list"))["tools"]
              if t["name"] == "run_python"]
    assert "outputSchema" not in run, run
    ts = json.loads(subprocess.run([KBOX, "tool-schema", "--format", "mcp"], capture_output=True,
                                   text=True, check=True).stdout)
    assert ts == run, "kbox tool-schema --format mcp differs from tools/list"
    assert o.close(30) == 0


check("by_default_run_python_declares_no_output_schema_as_tool_schema_says", t_default_tools)


def t_default_every_client():
    for i in (1, 2):
        r = plain_results[i]
        assert "structuredContent" not in r, r
        for kind in KINDS:
            text, images = view(kind, r)
            assert text == exec_texts[i], (kind, text, exec_texts[i])
            assert images == []
    assert plain_results[2]["isError"] is True and plain_results[1]["isError"] is False
    assert "\\[kernel died: forged]" in exec_texts[2], exec_texts[2]
    assert "ZeroDivisionError" in exec_texts[2], exec_texts[2]


check("by_default_every_client_reads_what_kbox_exec_prints_once_results_and_errors",
      t_default_every_client)

text_server = Server("--structured", "text")
text_results, _ = run_all(text_server, "views-exec2")


def t_text_mode():
    o = Server("--structured", "text")
    o.init()
    (run,) = [t for t in ok_result(o.request("tools/list"))["tools"]
              if t["name"] == "run_python"]
    o.close(30)
    schema = run["outputSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    ts = json.loads(subprocess.run([KBOX, "tool-schema", "--format", "mcp", "--structured",
                                    "text"], capture_output=True, text=True, check=True).stdout)
    assert ts == run, "kbox tool-schema --format mcp --structured text differs"
    for i in (1, 2):
        r = text_results[i]
        sc = r["structuredContent"]
        jsonschema.validate(sc, schema)
        assert sc["text"] == exec_texts[i], (sc, exec_texts[i])
        assert sc["status"] == ("error" if i == 2 else "ok"), sc
        assert sc["execution_count"] == i + 1 and sc["images"] == [], sc
        # content: the text once; structured: the text once, as a JSON
        # string; an error in a client that drops structuredContent then:
        # the content's text
        assert view("content", r) == (exec_texts[i], [])
        seen = view("structured", r)[0]
        if i == 2:
            assert seen == exec_texts[i], seen
        else:
            assert json.loads(seen)["text"] == exec_texts[i]
            assert seen.count(stringify(exec_texts[i])) == 1, seen
        # a client that shows both reads it twice: kbox-mcp(1) says to
        # leave --structured at none for one
        assert view("both", r)[0].count(exec_texts[i].splitlines()[0]) >= 2


check("structured_text_carries_the_same_text_once_beside_a_summary_that_validates", t_text_mode)


def t_full_mode():
    o = Server("--structured", "full")
    o.init()
    r = ok_result(o.call("run_python", {"code": "x = 6 * 7\nx"}))
    full_validator.validate(r["structuredContent"])
    assert r["structuredContent"]["value"]["data"]["text/plain"] == "42"
    assert view("content", r)[0].endswith("Out[1]: 42\n"), r
    assert json.loads(view("structured", r)[0])["schema"] == "kbox.result/2"
    e = ok_result(o.call("run_python", {"code": "1/0"}))
    assert e["isError"] is True and "ZeroDivisionError" in view("structured", e)[0], e
    assert o.close(60) == 0


check("structured_full_carries_the_whole_result_and_errors_still_read_as_text", t_full_mode)

PLOT = ("import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=50)\n"
        "plt.plot([1, 3, 2])\nplt.show()")
IMAGE_LINE = re.compile(r"^\[image saved: (/\S+\.png) \((\d+)×(\d+) px\)\]$", re.M)


def t_images():
    for args, inline in (((), False), (("--images", "inline"), True),
                         (("--images", "inline", "--structured", "text"), True)):
        o = Server(*args)
        o.init()
        r = ok_result(o.call("run_python", {"code": PLOT}))
        assert o.close(60) == 0
        for kind in KINDS:
            text, images = view(kind, r)
            if kind == "structured" and "structuredContent" in r:
                # the path and size, in the text and the summary
                sc = r["structuredContent"]
                m = IMAGE_LINE.search(sc["text"])
                assert m, sc
                assert [(i["path"], i["width"], i["height"]) for i in sc["images"]] == [
                    (m[1], int(m[2]), int(m[3]))], sc
                assert images == []
                continue
            m = IMAGE_LINE.search(text)
            assert m, (args, kind, text)
            if inline:
                assert [i["mimeType"] for i in images] == ["image/png"], (args, kind)
            else:
                assert images == [], (args, kind)


check("images_are_named_by_path_and_size_in_every_client_and_inline_where_content_is_shown",
      t_images)


def t_budget():
    o = Server("--structured", "text")
    o.init()
    r = ok_result(o.call("run_python", {"code": "for i in range(200000): print(i, 'x' * 40)"}))
    assert o.close(60) == 0
    for kind in KINDS:
        text, _ = view(kind, r)
        assert len(text) < BUDGET, (kind, len(text))
    assert "199999 " + "x" * 40 in r["structuredContent"]["text"]


check("a_long_output_stays_within_a_clients_budget_in_every_view", t_budget)


def t_input_and_nothing():
    o = Server()
    o.init()
    r = ok_result(o.call("run_python", {"code": "name = input('name? ')"}))
    text = view("content", r)[0]
    assert "input() is not available here: put the values in the code" in text, text
    assert "-i " not in text and "--input" not in text, text
    r = ok_result(o.call("run_python", {"code": "y = 1"}))
    assert r["content"] == [{"type": "text", "text": "[no output]"}], r
    assert o.close(60) == 0


check("input_says_what_a_model_can_do_and_no_output_is_said_not_an_empty_block",
      t_input_and_nothing)

for srv in (plain, text_server):
    srv.close(60)
plan()
