// The AI SDK adapter's bookkeeping with the real `ai` package, against a scripted
// stand-in for Assent's HTTP answers (no server): the SDK asks `needsApproval` again on
// resume and denies a call whose answer changed, so the adapter must answer the same per
// `toolCallId`; and it must run what was approved, once.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { generateText, stepCountIs, tool, type ModelMessage } from "ai";
import { z } from "zod";
import { Assent, type DecisionJson } from "../src/index.js";
import { AssentApprovals } from "../src/ai-sdk.js";
import { scriptedModel } from "./harness.js";

interface Stand {
  fetch: typeof fetch;
  proposals: Record<string, unknown>[];
  reports: Record<string, unknown>[];
}

/** Assent's answers: `refund` asks, and the person's decision is `decided`. */
function stand(decided: Partial<DecisionJson>): Stand {
  const proposals: Record<string, unknown>[] = [];
  const reports: Record<string, unknown>[] = [];
  const fake = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const body = init?.body === undefined ? undefined : (JSON.parse(String(init.body)) as Record<string, unknown>);
    const answer = (json: unknown) => new Response(JSON.stringify(json), { status: 200 });
    if (url.pathname === "/api/calls") {
      proposals.push(body ?? {});
      return answer({
        decision: "ask",
        tool: String(body?.tool),
        args: body?.args as Record<string, unknown>,
        toolCallId: String(body?.toolCallId),
        runKey: `client:shop:${String(body?.toolCallId)}`,
        changeSetId: "set-1",
        item: 0,
        revision: 1,
        ranUrl: "/api/change-sets/set-1/items/0/ran",
        outcomeUrl: "/api/change-sets/set-1/items/0/decision",
      } satisfies DecisionJson);
    }
    if (url.pathname.endsWith("/decision")) {
      const first = proposals[0] ?? {};
      return answer({
        decision: "run",
        tool: String(first.tool),
        args: first.args as Record<string, unknown>,
        runKey: "client:shop:x",
        changeSetId: "set-1",
        item: 0,
        ranUrl: "/api/change-sets/set-1/items/0/ran",
        outcomeUrl: "/api/change-sets/set-1/items/0/decision",
        ...decided,
      } satisfies DecisionJson);
    }
    if (url.pathname.endsWith("/ran")) {
      reports.push(body ?? {});
      return answer({ recorded: true, changeSetId: "set-1", item: 0, runKey: "client:shop:x" });
    }
    return new Response(JSON.stringify({ title: "not found" }), { status: 404 });
  }) as typeof fetch;
  return { fetch: fake, proposals, reports };
}

function refundTool(ran: Record<string, unknown>[]) {
  return {
    refund: tool({
      inputSchema: z.object({ order: z.string(), cents: z.number() }),
      execute: async (args) => {
        ran.push(args);
        return `refunded ${args.cents}`;
      },
    }),
  };
}

async function twoTurns(decided: Partial<DecisionJson>) {
  const s = stand(decided);
  const gate = new AssentApprovals(new Assent("http://assent.test", "token", { fetch: s.fetch }));
  const ran: Record<string, unknown>[] = [];
  const tools = gate.tools(refundTool(ran));
  const model = scriptedModel({ toolName: "refund", toolCallId: "call-1", input: { order: "A-17", cents: 42 } });
  const messages: ModelMessage[] = [{ role: "user", content: "refund" }];
  const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
  messages.push(...first.response.messages);
  const responses = await gate.responses(first.content);
  messages.push({ role: "tool", content: responses });
  const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
  return { s, ran, responses, second, gate, tools, model, messages };
}

describe("the AI SDK adapter's bookkeeping", () => {
  it("answers needsApproval the same on resume, proposes once, and runs the approved call once", async () => {
    const { s, ran, responses, second } = await twoTurns({});
    assert.equal(s.proposals.length, 1, "the resume does not propose the call again");
    assert.equal(responses[0]?.approved, true);
    assert.deepEqual(ran, [{ order: "A-17", cents: 42 }]);
    assert.match(second.text, /refunded 42/);
    assert.deepEqual(s.reports, [{ args: { order: "A-17", cents: 42 }, ok: true, result: "refunded 42" }]);
  });

  it("runs and reports a person's edit", async () => {
    const { s, ran, second } = await twoTurns({ args: { order: "A-17", cents: 7 }, edited: true });
    assert.deepEqual(ran, [{ order: "A-17", cents: 7 }]);
    assert.match(second.text, /refunded 7/);
    assert.deepEqual(s.reports[0]?.args, { order: "A-17", cents: 7 });
  });

  it("tells the model a rejection's reason and runs nothing", async () => {
    const { s, ran, responses, second } = await twoTurns({ decision: "deny", reason: "not today", ranUrl: null });
    assert.deepEqual(responses[0], { type: "tool-approval-response", approvalId: responses[0]?.approvalId, approved: false, reason: "not today" });
    assert.deepEqual(ran, []);
    assert.deepEqual(s.reports, []);
    assert.match(second.text, /not today/);
  });

  it("does not run the same approved call twice when the approval is replayed", async () => {
    const { s, ran, tools, model, messages } = await twoTurns({});
    // The application sends the turn that carries the approval again, without the result.
    const replay = await generateText({ model, tools, messages, stopWhen: stepCountIs(3) });
    assert.deepEqual(ran, [{ order: "A-17", cents: 42 }]);
    assert.equal(s.proposals.length, 1);
    assert.equal(s.reports.length, 1);
    assert.match(replay.text, /no decision of Assent/);
  });

  it("refuses a tool call id reused for other arguments: the decision covers the call proposed", async () => {
    const s = stand({});
    const gate = new AssentApprovals(new Assent("http://assent.test", "token", { fetch: s.fetch }));
    const tools = gate.tools(refundTool([]));
    const needs = tools.refund.needsApproval as (input: unknown, options: { toolCallId: string; messages: unknown[] }) => Promise<boolean>;
    assert.equal(await needs({ order: "A-17", cents: 1 }, { toolCallId: "same", messages: [] }), true);
    await assert.rejects(needs({ order: "A-17", cents: 999 }, { toolCallId: "same", messages: [] }), /other arguments/);
    assert.equal(await needs({ cents: 1, order: "A-17" }, { toolCallId: "same", messages: [] }), true, "the keys' order does not matter");
    assert.equal(s.proposals.length, 1);
  });

  it("validates a person's edit against the tool's input schema before the tool sees it", async () => {
    const { s, ran, second } = await twoTurns({ args: { order: "A-17", cents: "all of it" }, edited: true });
    assert.deepEqual(ran, [], "an edit the schema refuses does not run");
    assert.deepEqual(s.reports, [], "and nothing ran to report");
    assert.match(second.text, /do not fit its input schema/);
  });
});
