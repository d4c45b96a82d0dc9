// The official TypeScript MCP client (`@modelcontextprotocol/sdk` from npm, the SDK
// under Claude Desktop, Cursor and VS Code) in front of `assent mcp`, for the gateway's
// tests.
//
// Usage: NODE_PATH=PREFIX/node_modules node mcp_client_ts.cjs PLAN_JSON
//
// PLAN_JSON: {"command": "...", "args": ["..."], "calls": [{"tool": "...",
//     "arguments": {...}, "timeoutMs": N}]} starts COMMAND ARGS over stdio, lists the
//     tools, makes each call in order with the SDK's request timeout (default its own
//     60 s) and prints one JSON object on stdout: {"tools": [names], "calls":
//     [{"isError", "text", "meta", "endedAt"} or {"clientError", "code"}]} (`endedAt`:
//     when the SDK handed the result over, in milliseconds since the epoch, for tests
//     that time an answer). A call the SDK gives up
//     on (its timeout: code -32001, after which it sends notifications/cancelled) is
//     reported as its clientError. A step {"statusOf": N, "timeoutMs": T} instead calls
//     assent_status for the change set of call N's receipt (its _meta
//     "assent/changeSetId") every 300 ms until it is decided and any run finished (at
//     most T ms) and reports the last answer.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

async function main(plan) {
  const transport = new StdioClientTransport({ command: plan.command, args: plan.args });
  const client = new Client({ name: "assent-tests", version: "1.0.0" });
  await client.connect(transport);
  const listed = await client.listTools();
  const calls = [];
  for (const step of plan.calls) {
    if (step.statusOf !== undefined) {
      const set = ((calls[step.statusOf] || {}).meta || {})["assent/changeSetId"];
      const until = Date.now() + (step.timeoutMs || 30000);
      let answer = null;
      for (;;) {
        const result = await client.callTool({ name: "assent_status", arguments: { changeSetId: set } });
        answer = { isError: Boolean(result.isError), structured: result.structuredContent || null,
          text: (result.content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n") };
        const { status, run } = answer.structured || {};
        const settled = status !== "pending" && run !== "approved" && run !== "running";
        if (settled || Date.now() > until) break;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      calls.push(answer);
      continue;
    }
    const options = step.timeoutMs ? { timeout: step.timeoutMs } : undefined;
    try {
      const result = await client.callTool(
        { name: step.tool, arguments: step.arguments || {} },
        undefined,
        options,
      );
      const text = (result.content || [])
        .filter((block) => block.type === "text")
        .map((block) => block.text)
        .join("\n");
      const endedAt = Date.now();
      calls.push({ isError: Boolean(result.isError), text, meta: result._meta || null, endedAt });
    } catch (error) {
      calls.push({ clientError: String(error.message || error), code: error.code ?? null });
    }
  }
  await client.close();
  console.log(JSON.stringify({ tools: listed.tools.map((tool) => tool.name), calls }));
}

main(JSON.parse(process.argv[2])).catch((error) => {
  console.error(error);
  process.exit(1);
});
