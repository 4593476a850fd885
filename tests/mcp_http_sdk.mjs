// tests/mcp_http_sdk.mjs SDK_DIR URL TOKEN — the official MCP TypeScript
// SDK's client over its StreamableHTTPClientTransport, against kbox mcp
// --http: connect (initialize, the session id), list the tools, run
// x = 41 then x + 1 in the conversation's kernel, then a cell of a few
// seconds with progress asked for (the server's stream of events), end
// the session (DELETE).  Prints one JSON object of what it saw; exits 1 on an error.
const [sdk, url, token] = process.argv.slice(2);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StreamableHTTPClientTransport } = await import(`${sdk}/dist/esm/client/streamableHttp.js`);

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
try {
	const transport = new StreamableHTTPClientTransport(new URL(url), {
		requestInit: { headers: { Authorization: `Bearer ${token}` } },
	});
	const client = new Client({ name: "mcp_http_sdk", version: "1" });
	await client.connect(transport);
	const sessionId = transport.sessionId;
	const tools = (await client.listTools()).tools.map((t) => t.name).sort();
	const first = await client.callTool({ name: "run_python", arguments: { code: "x = 41" } });
	const second = await client.callTool({ name: "run_python", arguments: { code: "x + 1" } });
	// a long cell, with progress asked for: the server streams it (SSE)
	const progress = [];
	const long = await client.callTool(
		{ name: "run_python", arguments: { code: "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(1.5)" } },
		undefined,
		{ onprogress: (p) => progress.push(p.message || ""), resetTimeoutOnProgress: true });
	await transport.terminateSession();
	await client.close();
	console.log(JSON.stringify({ sessionId, tools, first: text(first), second: text(second),
		isError: second.isError, long: text(long), progress }));
} catch (e) {
	console.error(String(e && e.stack ? e.stack : e));
	process.exit(1);
}
