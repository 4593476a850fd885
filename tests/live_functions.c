/* tests/live_functions.c — host functions (kbox/functions.h): their
 * definitions, the Python stubs, and their calls from code in a real
 * ipykernel, answered by C callbacks through libkbox alone. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <unistd.h>

#include "tap.h"
#include "live.h"

static kbox_kspec_t *g_spec;
static char *g_dir;
static kbox_kernel_t *g_kernel;
static kbox_client_t *g_client;

static const char get_order_def[] =
        "{\"name\": \"get_order\", \"description\": \"Return one order, with its `status` and "
        "number of `items`.\", \"parameters\": {\"type\": \"object\", \"properties\": "
        "{\"order_id\": {\"type\": \"string\", \"description\": \"The order's id.\"}, "
        "\"verbose\": {\"type\": \"boolean\", \"default\": false}}, \"required\": "
        "[\"order_id\"], \"additionalProperties\": false}, \"returns\": {\"type\": "
        "\"object\"}}";

/* What the callbacks saw and do. */
typedef struct {
	int runs, cancels, running, max_running;
	bool defer;            /* answer from a timer, not at once */
	kbox_call_t *held[16]; /* deferred calls */
	size_t n_held;
	kbox_loop_t *loop;
	int records;
	char last_args[256];
} host_t;

static host_t g_host;

/* get_order: {"id", "status": "shipped", "items": 2}; "bad" fails; "lie"
 * returns what its "returns" schema refuses. */
static void answer(kbox_call_t *call)
{
	const char *id = json_string_value(json_object_get(kbox_call_args(call), "order_id"));
	g_host.running--;
	if (id && strcmp(id, "bad") == 0)
		kbox_call_fail(call, false, "no order %s", id);
	else if (id && strcmp(id, "lie") == 0)
		kbox_call_return(call, json_string("a string"));
	else
		kbox_call_return(call, json_pack("{s:s, s:s, s:i}", "id", id ? id : "?", "status",
		                                 "shipped", "items", 2));
}

static void run_get_order(void *arg, kbox_call_t *call)
{
	host_t *h = arg;
	char *a = json_dumps(kbox_call_args(call), JSON_COMPACT | JSON_SORT_KEYS);
	snprintf(h->last_args, sizeof h->last_args, "%s", a ? a : "");
	free(a);
	h->runs++;
	if (++h->running > h->max_running)
		h->max_running = h->running;
	if (h->defer && h->n_held < 16) {
		h->held[h->n_held++] = call;
		return;
	}
	answer(call);
}

static void cancel_get_order(void *arg, kbox_call_t *call)
{
	host_t *h = arg;
	h->cancels++;
	h->running--;
	for (size_t i = 0; i < h->n_held; i++)
		if (h->held[i] == call)
			h->held[i] = NULL;
}

static void observe(void *arg, const json_t *rec)
{
	(void)rec;
	((host_t *)arg)->records++;
}

static kbox_functions_t *make_set(kbox_error_t *err)
{
	kbox_functions_t *set = kbox_functions_new(err);
	json_t *def = json_loads(get_order_def, 0, NULL);
	if (set && kbox_functions_add(set, def, run_get_order, cancel_get_order, &g_host, err) < 0)
		kbox_functions_destroy(&set);
	json_decref(def);
	if (set)
		kbox_functions_set_observer(set, observe, &g_host);
	return set;
}

/* The error kbox_functions_add gives DEF (JSON text), or "" when none. */
static const char *add_error(const char *def)
{
	static kbox_error_t err;
	kbox_functions_t *set = kbox_functions_new(NULL);
	json_t *d = json_loads(def, 0, NULL);
	memset(&err, 0, sizeof err);
	if (kbox_functions_add(set, d, run_get_order, NULL, NULL, &err) == 0)
		err.msg[0] = '\0';
	json_decref(d);
	kbox_functions_destroy(&set);
	return err.msg;
}

TEST(definitions_that_cannot_be_used_are_refused_with_the_reason)
{
	CHECK_STR_EQ(add_error("{\"name\": \"class\"}"),
	             "host function \"class\": its name is not a Python identifier (letters, "
	             "digits and _, at most 64, not a keyword, not starting with _ or a digit)");
	CHECK_STR_EQ(add_error("{\"name\": \"_x\"}"),
	             "host function \"_x\": its name is not a Python identifier (letters, "
	             "digits and _, at most 64, not a keyword, not starting with _ or a digit)");
	CHECK_STR_EQ(add_error("{\"description\": \"x\"}"),
	             "a host function needs a \"name\" (a string)");
	CHECK_STR_EQ(add_error("{\"name\": \"f\", \"parameters\": {\"type\": \"array\"}}"),
	             "host function f: \"parameters\" must have \"type\": \"object\"");
	CHECK_STR_EQ(add_error("{\"name\": \"f\", \"parameters\": {\"properties\": "
	                       "{\"order-id\": {}}}}"),
	             "host function f: the parameter name \"order-id\" is not a Python "
	             "identifier (letters, digits and _, not a keyword, not starting with _ or a "
	             "digit)");
	CHECK_STR_EQ(add_error("{\"name\": \"f\", \"parameters\": {\"properties\": {}, "
	                       "\"required\": [\"a\"]}}"),
	             "host function f: \"required\" names \"a\", which is not one of "
	             "\"properties\"");
	CHECK_STR_EQ(add_error("{\"name\": \"f\", \"description\": 3}"),
	             "host function f: \"description\" must be a string");
	CHECK_STR_EQ(
	        add_error("{\"name\": \"f\", \"returns\": {\"$ref\": \"other.json\"}}"),
	        "host function f: \"returns\": the schema cannot be used: \"$ref\": other.json "
	        "is no place in this schema kbox can follow");
	{
		kbox_error_t err = {0};
		kbox_functions_t *set = make_set(&err);
		json_t *d = json_loads("{\"name\": \"get_order\"}", 0, NULL);
		CHECK(kbox_functions_add(set, d, run_get_order, NULL, NULL, &err) == -1);
		CHECK_STR_EQ(err.msg, "host function \"get_order\" is defined twice");
		CHECK_INT_EQ(kbox_functions_count(set), 1);
		json_decref(d);
		kbox_functions_destroy(&set);
	}
}

TEST(stubs_give_each_function_its_signature_and_docstring)
{
	kbox_functions_t *set = make_set(NULL);
	json_t *d = json_loads(
	        "{\"name\": \"search\", \"parameters\": {\"type\": \"object\", "
	        "\"properties\": {\"q\": {\"type\": \"string\"}, \"kind\": "
	        "{\"enum\": [\"a\", \"b\"]}, \"tags\": {\"type\": \"array\", "
	        "\"items\": {\"type\": \"string\"}}, \"n\": {\"type\": [\"integer\", "
	        "\"null\"], \"default\": 10}}, \"required\": [\"q\"]}}",
	        0, NULL);
	char *stubs;
	REQUIRE(set && d);
	CHECK(kbox_functions_add(set, d, run_get_order, NULL, NULL, NULL) == 0);
	stubs = kbox_functions_stubs(set);
	CHECK_STR_EQ(
	        stubs,
	        "from typing import Any, Literal\n"
	        "\n\n"
	        "async def get_order(order_id: str, verbose: bool = False) -> dict[str, Any]:\n"
	        "    \"\"\"Return one order, with its `status` and number of `items`.\n"
	        "\n"
	        "    Args:\n"
	        "        order_id: The order's id.\n"
	        "    \"\"\"\n"
	        "\n\n"
	        "async def search(q: str, kind: Literal[\"a\", \"b\"] | None = None, tags: "
	        "list[str] | None = None, n: int | None = 10) -> Any:\n"
	        "    ...\n");
	free(stubs);
	json_decref(d);
	kbox_functions_destroy(&set);
}

/* Run CODE with SET (and LINES, N of them), collected. */
static kbox_exec_t *run_fn(kbox_functions_t *set, const char *code, const char *const *lines,
                           size_t n)
{
	kbox_exec_opts_t o = {0};
	kbox_error_t err = {0};
	kbox_exec_t *x;
	o.code = code;
	o.collect = true;
	o.timeout_ms = LIVE_EXEC_MS;
	o.interrupt_on_timeout = true;
	o.functions = set;
	o.input_lines = lines;
	o.n_input = n;
	x = kbox_client_execute(g_client, &o, &err);
	if (!x)
		printf("# execute: %s\n", err.msg);
	return x;
}

/* The error of X as "ename: evalue", or "" (static). */
static const char *error_of(const kbox_exec_t *x)
{
	static char buf[1024];
	const kbox_msg_t *m = live_output(x, "error");
	buf[0] = '\0';
	if (m)
		snprintf(buf, sizeof buf, "%s: %s",
		         json_string_value(json_object_get(kbox_msg_content(m), "ename")),
		         json_string_value(json_object_get(kbox_msg_content(m), "evalue")));
	return buf;
}

static kbox_functions_t *g_set;

TEST(kernel_code_defines_the_functions_silently)
{
	kbox_error_t err = {0};
	kbox_exec_opts_t o = {0};
	kbox_exec_t *x;
	char *code;
	REQUIRE(g_kernel);
	g_set = make_set(&err);
	REQUIRE(g_set);
	code = kbox_functions_kernel_code(g_set);
	REQUIRE(code);
	o.code = code;
	o.silent = true;
	o.collect = true;
	o.timeout_ms = LIVE_EXEC_MS;
	x = kbox_client_execute(g_client, &o, &err);
	free(code);
	REQUIRE(x);
	CHECK_INT_EQ(kbox_exec_status(x), KBOX_EXEC_OK);
	CHECK_INT_EQ(live_output_count(x, "stream") + live_output_count(x, "error") +
	                     live_output_count(x, "execute_result"),
	             0);
	kbox_exec_destroy(&x);
	x = run_fn(g_set,
	           "import inspect, kbox_functions\n"
	           "print(inspect.signature(get_order), get_order.__doc__, "
	           "kbox_functions.get_order is get_order, sorted(k for k in dir() if "
	           "'kbox' in k or k.startswith('_k')))",
	           NULL, 0);
	REQUIRE(x);
	{
		char *out = live_stream(x, "stdout");
		CHECK_STR_EQ(out,
		             "(order_id: str, verbose: bool = False) -> dict Return one order, "
		             "with its `status` and number of `items`. True ['kbox_functions']\n");
		free(out);
	}
	kbox_exec_destroy(&x);
}

TEST(a_plain_call_returns_the_result_and_is_recorded)
{
	kbox_exec_t *x;
	const json_t *calls;
	REQUIRE(g_set);
	memset(&g_host, 0, sizeof g_host);
	x = run_fn(g_set, "get_order('o1')", NULL, 0);
	REQUIRE(x);
	CHECK_INT_EQ(kbox_exec_status(x), KBOX_EXEC_OK);
	CHECK_STR_EQ(live_result(x), "{'id': 'o1', 'status': 'shipped', 'items': 2}");
	CHECK_STR_EQ(g_host.last_args, "{\"order_id\":\"o1\"}");
	calls = kbox_exec_calls(x);
	CHECK_INT_EQ(json_array_size(calls), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(calls, 0), "name")),
	             "get_order");
	CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(calls, 0), "status")), "ok");
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(calls, 0), "args_bytes")),
	             17);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(calls, 0), "result_bytes")),
	             40);
	CHECK_INT_EQ(g_host.records, 1);
	CHECK_INT_EQ(kbox_exec_inputs_answered(x), 0);
	kbox_exec_destroy(&x);
}

TEST(gathered_calls_come_as_one_request_and_return_in_order)
{
	kbox_exec_t *x;
	REQUIRE(g_set);
	memset(&g_host, 0, sizeof g_host);
	x = run_fn(g_set,
	           "import asyncio\n"
	           "orders = await asyncio.gather(get_order('o1'), get_order('o2'))\n"
	           "[o['status'] for o in orders], [o['id'] for o in orders]",
	           NULL, 0);
	REQUIRE(x);
	CHECK_STR_EQ(error_of(x), "");
	CHECK_STR_EQ(live_result(x), "(['shipped', 'shipped'], ['o1', 'o2'])");
	CHECK_INT_EQ(g_host.runs, 2);
	CHECK_INT_EQ(json_array_size(kbox_exec_calls(x)), 2);
	kbox_exec_destroy(&x);
}

TEST(each_error_reaches_the_code_as_an_exception_it_can_read)
{
	static const struct {
		const char *code, *error;
	} cases[] = {
	        {"await get_order(42)",
	         "ArgumentError: get_order(): order_id must be a string, got int"},
	        {"get_order(order_id='o1', verbose=1)",
	         "ArgumentError: get_order(): verbose must be a boolean, got int"},
	        {"get_order()", "TypeError: get_order(): missing a required argument: 'order_id'"},
	        {"get_order('o1', nope=1)",
	         "TypeError: get_order(): got an unexpected keyword argument 'nope'"},
	        {"get_order('bad')", "FunctionError: get_order(): no order bad"},
	        {"get_order('lie')",
	         "FunctionError: get_order(): the host function's result is not what it "
	         "promises: the result must be a dict, got str"},
	        {"get_order(float('nan'))",
	         "ArgumentError: get_order(): Out of range float values are not JSON compliant"},
	        {"get_order(object())",
	         "ArgumentError: get_order(): an argument of type object cannot be sent: pass str, "
	         "int, float, bool, None, list or dict"},
	        {"get_order([[]] * 700000)",
	         "FunctionError: get_order(): the request of calls would take more than 128 MiB to "
	         "read: send fewer or smaller arguments"},
	        {"get_order('o1', verbose=None)",
	         "ArgumentError: get_order(): verbose must be a boolean, got None"},
	};
	REQUIRE(g_set);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		kbox_exec_t *x = run_fn(g_set, cases[i].code, NULL, 0);
		REQUIRE(x);
		CHECK_INT_EQ(kbox_exec_status(x), KBOX_EXEC_ERROR);
		CHECK_STR_EQ(error_of(x), cases[i].error);
		kbox_exec_destroy(&x);
	}
}

TEST(input_keeps_its_behaviour_beside_the_calls)
{
	const char *lines[] = {"typed"};
	kbox_exec_t *x;
	REQUIRE(g_set);
	x = run_fn(g_set, "input('?')", NULL, 0);
	REQUIRE(x);
	CHECK_STR_EQ(error_of(x), "StdinNotImplementedError: raw_input was called, but this "
	                          "frontend does not support input requests.");
	kbox_exec_destroy(&x);
	x = run_fn(g_set,
	           "a = get_order('o3')['id']\nb = input('?')\n(a, b, get_order('o4')['id'])",
	           lines, 1);
	REQUIRE(x);
	CHECK_STR_EQ(live_result(x), "('o3', 'typed', 'o4')");
	CHECK_INT_EQ(kbox_exec_inputs_answered(x), 1);
	kbox_exec_destroy(&x);
}

TEST(the_budget_of_calls_fails_the_calls_past_it)
{
	kbox_exec_t *x;
	REQUIRE(g_set);
	kbox_functions_set_limits(g_set, 3, 0);
	x = run_fn(g_set,
	           "import asyncio, kbox_functions\n"
	           "r = await asyncio.gather(*[get_order(f'o{i}') for i in range(5)], "
	           "return_exceptions=True)\n"
	           "[type(e).__name__ if isinstance(e, Exception) else e['id'] for e in r]",
	           NULL, 0);
	kbox_functions_set_limits(g_set, 0, 0);
	REQUIRE(x);
	CHECK_STR_EQ(live_result(x), "['o0', 'o1', 'o2', 'CallBudgetExceeded', "
	                             "'CallBudgetExceeded']");
	CHECK_STR_EQ(
	        json_string_value(json_object_get(json_array_get(kbox_exec_calls(x), 0), "error")),
	        "this execution has made the 3 calls it may make: make fewer calls (one call "
	        "can do more), or go on in another execution");
	kbox_exec_destroy(&x);
}

/* ---- answers from the loop ---- */

typedef struct {
	bool done;
	kbox_exec_t *x;
} wait_t;

static void on_done(void *arg, kbox_exec_t *x)
{
	wait_t *w = arg;
	w->done = true;
	w->x = x;
}

/* Answer the held calls, once they are all there (N). */
static int release(kbox_loop_t *loop, void *arg)
{
	size_t n = (size_t)(uintptr_t)arg;
	(void)loop;
	if (g_host.n_held < n)
		return 0;
	for (size_t i = 0; i < g_host.n_held; i++)
		if (g_host.held[i])
			answer(g_host.held[i]);
	g_host.n_held = 0;
	return 0;
}

/* Run CODE on a loop, holding the calls until N are held (N = 0: never
 * answered; the execution is interrupted after the first is held). */
static kbox_exec_t *run_held(const char *code, size_t n)
{
	kbox_loop_t *loop = kbox_loop_new(NULL);
	kbox_exec_opts_t o = {0};
	wait_t w = {0};
	kbox_exec_t *x;
	long long end = live_ms() + LIVE_EXEC_MS;
	int t;
	bool interrupted = false;

	if (!loop || kbox_client_attach(g_client, loop, NULL) < 0)
		return NULL;
	g_host.defer = true;
	o.code = code;
	o.collect = true;
	o.timeout_ms = LIVE_EXEC_MS;
	o.interrupt_on_timeout = true;
	o.functions = g_set;
	x = kbox_client_execute_begin(g_client, &o, on_done, &w, NULL);
	t = kbox_loop_add_timer(loop, 10, true, release, (void *)(uintptr_t)(n ? n : 99), NULL);
	while (x && !w.done && live_ms() < end) {
		kbox_loop_once(loop, 100);
		if (!n && g_host.n_held && !interrupted) {
			kbox_exec_interrupt(x, -1, "given up", NULL);
			interrupted = true;
		}
	}
	kbox_loop_cancel_timer(loop, t);
	kbox_client_detach(g_client);
	kbox_loop_destroy(&loop);
	g_host.defer = false;
	return w.done ? w.x : NULL;
}

TEST(gathered_calls_run_at_once_up_to_the_cap)
{
	kbox_exec_t *x;
	REQUIRE(g_set);
	memset(&g_host, 0, sizeof g_host);
	x = run_held("import asyncio\n"
	             "len(await asyncio.gather(*[get_order(f'o{i}') for i in range(8)]))",
	             8);
	REQUIRE(x);
	CHECK_STR_EQ(live_result(x), "8");
	CHECK_INT_EQ(g_host.max_running, 8);
	kbox_exec_destroy(&x);
	memset(&g_host, 0, sizeof g_host);
	kbox_functions_set_limits(g_set, 0, 2);
	x = run_held("import asyncio\n"
	             "len(await asyncio.gather(*[get_order(f'o{i}') for i in range(8)]))",
	             2);
	kbox_functions_set_limits(g_set, 0, 0);
	REQUIRE(x);
	CHECK_STR_EQ(live_result(x), "8");
	CHECK_INT_EQ(g_host.max_running, 2);
	CHECK_INT_EQ(g_host.runs, 8);
	kbox_exec_destroy(&x);
}

TEST(an_interrupted_call_is_cancelled_and_the_kernel_goes_on)
{
	kbox_exec_t *x;
	REQUIRE(g_set);
	memset(&g_host, 0, sizeof g_host);
	x = run_held("get_order('slow')", 0);
	REQUIRE(x);
	CHECK_STR_EQ(error_of(x), "KeyboardInterrupt: ");
	CHECK_INT_EQ(g_host.cancels, 1);
	CHECK_STR_EQ(
	        json_string_value(json_object_get(json_array_get(kbox_exec_calls(x), 0), "status")),
	        "cancelled");
	kbox_exec_destroy(&x);
	x = run_fn(g_set, "get_order('after')['id']", NULL, 0);
	REQUIRE(x);
	CHECK_STR_EQ(live_result(x), "'after'");
	kbox_exec_destroy(&x);
}

int main(void)
{
	kbox_error_t err = {0};

	if (kbox_init() != 0) {
		printf("Bail out! kbox_init failed\n");
		return 1;
	}
	RUN(definitions_that_cannot_be_used_are_refused_with_the_reason);
	RUN(stubs_give_each_function_its_signature_and_docstring);

	g_spec = live_python3();
	if (!g_spec) {
		printf("# SKIP the kernel tests: no Debian python3 kernelspec with ipykernel\n");
		return tap_done();
	}
	g_dir = live_mkdtemp("functions");
	if (g_dir)
		g_kernel = live_start(g_spec, g_dir, &g_client, &err);
	if (!g_kernel)
		printf("# the kernel did not start: %s\n", err.msg);
	RUN(kernel_code_defines_the_functions_silently);
	RUN(a_plain_call_returns_the_result_and_is_recorded);
	RUN(gathered_calls_come_as_one_request_and_return_in_order);
	RUN(each_error_reaches_the_code_as_an_exception_it_can_read);
	RUN(input_keeps_its_behaviour_beside_the_calls);
	RUN(the_budget_of_calls_fails_the_calls_past_it);
	RUN(gathered_calls_run_at_once_up_to_the_cap);
	RUN(an_interrupted_call_is_cancelled_and_the_kernel_goes_on);

	kbox_functions_destroy(&g_set);
	if (g_kernel)
		kbox_kernel_stop(g_kernel, g_client, NULL);
	kbox_client_destroy(&g_client);
	kbox_kernel_destroy(&g_kernel);
	kbox_kspec_destroy(&g_spec);
	live_rm_rf(g_dir);
	free(g_dir);
	return tap_done();
}
