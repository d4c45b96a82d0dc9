// What the tests get from the Rust driver (crates' client test driver): a running
// `assent serve`, an agent token, the `assent` binary and the database it serves, all
// through the environment; and a scripted model for the AI SDK.

import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { promisify } from "node:util";
import type { LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";

const run = promisify(execFile);

export interface Server {
  url: string;
  admin: string;
  bin: string;
  db: string;
}

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set: run these tests through the Rust driver (crates/assent-cli/tests/cli/clients.rs), which starts assent serve`);
  }
  return value;
}

/** The server the driver started (the same variables as the Python tests'). */
export function server(): Server {
  return {
    url: required("ASSENT_URL").replace(/\/+$/, ""),
    admin: required("ASSENT_ADMIN_TOKEN"),
    bin: required("ASSENT_BIN"),
    db: required("ASSENT_DB"),
  };
}

/** The admin API, for setting up agents and tokens. */
async function admin(s: Server, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${s.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${s.admin}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${method} ${path}: ${response.status} ${text}`);
  }
  return JSON.parse(text) as unknown;
}

/** A fresh agent (so that tests share nothing) with `rules` (tool: allow | ask | deny),
 * and its agent token. */
export async function agent(s: Server, rules: Record<string, "allow" | "ask" | "deny">): Promise<{ name: string; token: string }> {
  const name = `ts-${randomUUID().slice(0, 10)}`;
  await admin(s, "POST", "/api/agents", { id: name, categories: ["client"] });
  for (const [tool, action] of Object.entries(rules)) {
    await admin(s, "PUT", `/api/agents/${name}/rules/${tool}`, { action });
  }
  const token = (await admin(s, "POST", "/api/tokens", { role: "agent", agentId: name })) as { secret: string };
  return { name, token: token.secret };
}

/** Run the real `assent` CLI on the server's database (another process than the server
 * and the test). */
export async function assent(s: Server, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(s.bin, ["--db", s.db, ...args], { env: { ...process.env, RUST_LOG: "" } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === "number" ? failed.code : -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

/** `assent …` that must succeed. */
export async function assentOk(s: Server, ...args: string[]): Promise<string> {
  const out = await assent(s, ...args);
  if (out.code !== 0) {
    throw new Error(`assent ${args.join(" ")} exited ${out.code}: ${out.stderr}${out.stdout}`);
  }
  return out.stdout;
}

/** A fresh tool-call id: the run key is per agent, and other tests share the agent. */
export function callId(): string {
  return `ts-${randomUUID()}`;
}

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model that calls one tool, then, once the prompt carries the tool's outcome,
 * answers with that outcome as text (so a test reads what the model was told). */
export function scriptedModel(call: { toolName: string; toolCallId: string; input: Record<string, unknown> }): MockLanguageModelV3 {
  return new MockLanguageModelV3({
    doGenerate: async (options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> => {
      const last = options.prompt.at(-1);
      if (last?.role === "tool") {
        const outputs = last.content.flatMap((part) => (part.type === "tool-result" ? [part.output] : []));
        return {
          content: [{ type: "text", text: `told: ${JSON.stringify(outputs)}` }],
          finishReason: { unified: "stop", raw: "stop" },
          usage,
          warnings: [],
        };
      }
      return {
        content: [{ type: "tool-call", toolCallId: call.toolCallId, toolName: call.toolName, input: JSON.stringify(call.input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}
