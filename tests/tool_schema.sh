#!/bin/sh
# tests/tool_schema.sh — kbox tool-schema: the run-code tool's definition
# in each API's envelope.  Each output is one JSON object on one line that
# validates against the shape of its API's tool (OpenAI Chat Completions
# "tools" element, Anthropic Messages "tools" element, MCP Tool of
# tools/list; the shapes below are written from their documentation);
# its parameters are a valid JSON Schema (draft 2020-12) that takes
# {"code": ...} with an optional numeric timeout and refuses anything
# else; the three carry the same tool.  Bad input: one line, exit 2.  TAP.
#
# Environment (set by `make check`): top_srcdir, top_builddir, KERNEL_PYTHON.
# shellcheck disable=SC2016 # eval strings expand later, on purpose
set -u

top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
# shellcheck source=tests/lib.sh
. "$top_srcdir/tests/lib.sh"
fresh

# valid API [FILE]: FILE (default ./stdout) is one line, one JSON object
# of API's tool shape; its description and parameters are kept in API.tool.
valid() {
	"$PY" - "$1" "${2:-stdout}" <<'EOF'
import json, sys, jsonschema
api = sys.argv[1]
lines = open(sys.argv[2]).read().splitlines()
assert len(lines) == 1, lines
tool = json.loads(lines[0])
name = {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}
object_schema = {"type": "object", "required": ["type", "properties"],
                 "properties": {"type": {"const": "object"}, "properties": {"type": "object"},
                                "required": {"type": "array", "items": {"type": "string"}}}}
shapes = {
    # platform.openai.com/docs/api-reference/chat/create: tools[]
    "openai": {"type": "object", "required": ["type", "function"], "additionalProperties": False,
               "properties": {"type": {"const": "function"},
                              "function": {"type": "object", "required": ["name", "parameters"],
                                           "additionalProperties": False,
                                           "properties": {"name": name,
                                                         "description": {"type": "string"},
                                                         "parameters": object_schema,
                                                         "strict": {"type": "boolean"}}}}},
    # docs.anthropic.com/en/docs/build-with-claude/tool-use: tools[]
    "anthropic": {"type": "object", "required": ["name", "input_schema"],
                  "additionalProperties": False,
                  "properties": {"name": name, "description": {"type": "string"},
                                 "input_schema": object_schema}},
    # modelcontextprotocol.io/specification, schema.ts: Tool
    "mcp": {"type": "object", "required": ["name", "inputSchema"],
            "properties": {"name": {"type": "string"}, "title": {"type": "string"},
                           "description": {"type": "string"}, "inputSchema": object_schema,
                           "outputSchema": object_schema, "annotations": {"type": "object"}}},
}
jsonschema.validate(tool, shapes[api])
params = {"openai": lambda t: t["function"]["parameters"],
          "anthropic": lambda t: t["input_schema"], "mcp": lambda t: t["inputSchema"]}[api](tool)
jsonschema.Draft202012Validator.check_schema(params)
v = jsonschema.Draft202012Validator(params)
for ok in [{"code": "1 + 1"}, {"code": "x", "timeout": 30}, {"code": "", "timeout": 0.5},
           {"code": "x", "timeout": 2073600}]:
    assert v.is_valid(ok), ok
for bad in [{}, {"timeout": 3}, {"code": 1}, {"code": "x", "timeout": "3"},
            {"code": "x", "timeout": -1}, {"code": "x", "timeout": 2073601},
            {"code": "x", "other": 1}]:
    assert not v.is_valid(bad), bad
desc = tool["function"]["description"] if api == "openai" else tool["description"]
for needed in ["persist", "pandas", "no network", "/workspace", "path", "Print", "Never compute",
               "shown with a backslash before it"]:
    assert needed in desc, needed
if api == "mcp":
    # kbox mcp answers a long call early: the one argument and sentence more
    more = (" A call still running at its soft time limit (soft_timeout) returns what the code "
            "printed so far and says so: the code goes on running, and wait_python gives what "
            "it prints next and, once it ends, its whole result.")
    assert desc.endswith(more), desc[-300:]
    desc = desc[:-len(more)]
    assert params["properties"].pop("soft_timeout")["type"] == "number", params
    assert params["properties"].pop("session")["type"] == "string", params
open(api + ".tool", "w").write(json.dumps([desc, params], sort_keys=True))
EOF
}

# same_tool: the default (openai), anthropic and mcp outputs are valid, as
# tests 4, 2 and 3 check, and carry one tool (MCP's with soft_timeout and a
# sentence on it more).  It validates them itself,
# so that it holds alone (KBOX_TEST_RUN may leave those tests out).
same_tool() {
	rm -f openai.tool anthropic.tool mcp.tool
	[ "$(cat default.rc)" = 0 ] && valid openai default.out >/dev/null 2>&1 &&
		for api in anthropic mcp; do
			[ "$(cat "$api.rc")" = 0 ] && [ ! -s "$api.err" ] &&
				valid "$api" "$api.out" >/dev/null 2>&1 || return 1
		done &&
		cmp -s openai.tool anthropic.tool && cmp -s openai.tool mcp.tool
}
# save_as NAME: the last kbox's outputs, as NAME.{out,err,rc}.
save_as() {
	cp stdout "$1.out" && cp stderr "$1.err" && echo "$rc" >"$1.rc"
}

for api in openai anthropic mcp; do
	kbox tool-schema --format "$api"
	save_as "$api"
	check "${api}_tool_is_valid" eval '[ "$rc" = 0 ] && [ ! -s stderr ] && valid "$api"'
done
kbox tool-schema
save_as default
check default_is_openai eval '[ "$rc" = 0 ] && valid openai'
check the_three_carry_the_same_tool same_tool

# run_python's outputSchema is that of kbox mcp --structured MODE: none by
# default (the result carries no structured content), the summary with the
# text, or the whole kbox.result/2
kbox tool-schema --format mcp
check mcp_has_no_output_schema_by_default eval '[ "$rc" = 0 ] &&
	"$PY" -c "import json; t = json.load(open(\"stdout\")); assert \"outputSchema\" not in t"'
kbox tool-schema --format mcp --structured text
check mcp_structured_text_has_the_summarys_schema eval '[ "$rc" = 0 ] &&
	"$PY" -c "import json, jsonschema; o = json.load(open(\"stdout\"))[\"outputSchema\"]
jsonschema.Draft202012Validator.check_schema(o)
assert o[\"required\"] == [\"text\", \"status\", \"execution_count\", \"images\"], o
jsonschema.validate({\"text\": \"Out[1]: 2\\n\", \"status\": \"ok\", \"execution_count\": 1, \"images\": []}, o)"'
kbox tool-schema --format mcp --structured full
check mcp_structured_full_has_the_result_schema eval '[ "$rc" = 0 ] &&
	"$PY" -c "import json; o = json.load(open(\"stdout\"))[\"outputSchema\"]
w = json.load(open(\"$top_srcdir/tests/result.schema.json\"))
assert o[\"\$defs\"] == w[\"\$defs\"] and \"schema\" in o[\"anyOf\"][0][\"required\"], o
assert o[\"anyOf\"][1][\"properties\"][\"status\"][\"enum\"][-1] == \"running\", o"'
# its errors are JSON on standard output, as its output is in every
# format, wherever the options come; and one line on standard error
# json_failure TEXT: standard output is the usage failure saying TEXT.
json_failure() {
	"$PY" -c 'import json, sys; j = json.load(open("stdout"))
sys.exit(not (j["status"] == "failed" and j["error"] == {"kind": "usage", "message": sys.argv[1]}))' "$1"
}
kbox tool-schema --structured text
check structured_without_format_mcp_is_refused eval '[ "$rc" = 2 ] &&
	json_failure "--structured is for --format mcp only: only an MCP tool has an outputSchema" &&
	[ "$(cat stderr)" = "kbox tool-schema: --structured is for --format mcp only: only an MCP tool has an outputSchema" ]'
kbox tool-schema --structured json
check a_bad_structured_is_one_line_and_exit_2 eval '[ "$rc" = 2 ] &&
	json_failure "invalid --structured \"json\": expected none, text or full" &&
	[ "$(cat stderr)" = "kbox tool-schema: invalid --structured \"json\": expected none, text or full" ]'
kbox tool-schema --structured bogus --format mcp
check a_bad_option_before_format_is_json_too eval '[ "$rc" = 2 ] &&
	json_failure "invalid --structured \"bogus\": expected none, text or full"'

kbox tool-schema --format gemini
check a_bad_format_is_one_line_and_exit_2 eval '[ "$rc" = 2 ] &&
	[ "$(cat stderr)" = "kbox tool-schema: invalid --format \"gemini\": expected openai, anthropic or mcp" ]'
kbox tool-schema extra
check an_operand_is_refused eval '[ "$rc" = 2 ] &&
	json_failure "unexpected argument \"extra\" (see kbox tool-schema --help)" &&
	[ "$(cat stderr)" = "kbox tool-schema: unexpected argument \"extra\" (see kbox tool-schema --help)" ]'
kbox tool-schema --format mcp extra
check after_format_its_errors_are_json eval '[ "$rc" = 2 ] &&
	[ "$(cat stdout)" = "{\"schema\":\"kbox.result/2\",\"status\":\"failed\",\"error\":{\"kind\":\"usage\",\"message\":\"unexpected argument \\\"extra\\\" (see kbox tool-schema --help)\"}}" ]'

# a full disk: one line that says why, exit 5
timeout -k 5 30 "$KBOX" tool-schema >/dev/full 2>stderr
rc=$?
: >stdout
check a_full_disk_is_one_line_with_the_reason_and_exit_5 eval '[ "$rc" = 5 ] &&
	[ "$(cat stderr)" = "kbox tool-schema: cannot write standard output: No space left on device" ]'

tests_done
