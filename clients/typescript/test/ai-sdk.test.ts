// The AI SDK adapter with the real `ai` package and its mock language model, against a
// real `assent serve`: a call the rules allow runs at once; a call that asks waits and is
// confirmed, edited or rejected from another process (`assent confirm`, `edit`,
// `reject`), and the SDK's run continues accordingly; every run is reported, a forged
// report is refused, and the consent chain verifies.

import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { generateText, stepCountIs, tool, type ModelMessage } from "ai";
import { z } from "zod";
import { Assent, AssentError, type Decision } from "../src/index.js";
import { AssentApprovals } from "../src/ai-sdk.js";
import { agent, assent, assentOk, callId, scriptedModel, server, type Server } from "./harness.js";

const LOOKUP = "ts_lookup";
const REFUND = "ts_refund";

let s: Server;
/** The token of this file's agent (its own, with its own rules). */
let token: string;

before(async () => {
  s = server();
  token = (await agent(s, { [LOOKUP]: "allow", [REFUND]: "ask" })).token;
});

/** The tools, each recording the arguments it ran with. */
function shop(ran: Record<string, unknown>[]) {
  return {
    [LOOKUP]: tool({
      description: "Look an order up",
      inputSchema: z.object({ order: z.string() }),
      execute: async ({ order }) => {
        ran.push({ order });
        return { order, status: "shipped" };
      },
    }),
    [REFUND]: tool({
      description: "Refund part of an order",
      inputSchema: z.object({ order: z.string(), cents: z.number().int() }),
      execute: async ({ order, cents }) => {
        ran.push({ order, cents });
        return `refunded ${cents} cents on ${order}`;
      },
    }),
  };
}

/** The first turn of a refund that asks: the SDK stops at the approval request. */
async function askRefund(gate: AssentApprovals, cents: number) {
  const ran: Record<string, unknown>[] = [];
  const tools = gate.tools(shop(ran));
  const id = callId();
  const model = scriptedModel({ toolName: REFUND, toolCallId: id, input: { order: "A-17", cents } });
  const messages: ModelMessage[] = [{ role: "user", content: "refund A-17" }];
  const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  messages.push(...first.response.messages);
  const requests = first.content.filter((part) => part.type === "tool-approval-request");
  assert.equal(requests.length, 1, "the SDK asks for approval");
  assert.deepEqual(ran, [], "nothing ran before a person decided");
  const decision = gate.decision(id);
  assert.ok(decision !== undefined && decision.status === "pending", `pending in Assent: ${JSON.stringify(decision)}`);
  assert.ok(decision.changeSetId !== null && decision.item !== null);
  /** Await the person (the responses), answer the SDK, and run the second turn. */
  const resume = async (decide: () => Promise<unknown>) => {
    const answered = gate.responses(first.content);
    await decide();
    const responses = await answered;
    messages.push({ role: "tool", content: responses });
    const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    return { responses, second };
  };
  return { id, decision, ran, resume, tools, model, messages };
}

function item(decision: Decision): [string, string] {
  return [decision.changeSetId ?? "", String(decision.item)];
}

describe("the AI SDK's tool approval, answered by Assent", () => {
  it("runs a call the rules allow at once, and reports it", async () => {
    const client = new Assent(s.url, token);
    const gate = new AssentApprovals(client);
    const ran: Record<string, unknown>[] = [];
    const id = callId();
    const result = await generateText({
      model: scriptedModel({ toolName: LOOKUP, toolCallId: id, input: { order: "A-17" } }),
      tools: gate.tools(shop(ran)),
      prompt: "where is A-17?",
      stopWhen: stepCountIs(5),
    });
    assert.deepEqual(ran, [{ order: "A-17" }]);
    assert.equal(result.content.filter((part) => part.type === "tool-approval-request").length, 0);
    assert.match(result.text, /shipped/);
    assert.equal(gate.decision(id), undefined, "the decision was used up by its run");
    const audit = await assentOk(s, "audit", "--json");
    assert.match(audit, new RegExp(id), "the run is in the audit trail under its run key");
  });

  it("waits for a person, who confirms from another process; the tool runs and is reported", async () => {
    const gate = new AssentApprovals(new Assent(s.url, token));
    const { decision, ran, resume } = await askRefund(gate, 4200);
    const { responses, second } = await resume(() => assentOk(s, "confirm", ...item(decision)));
    assert.equal(responses[0]?.approved, true);
    assert.deepEqual(ran, [{ order: "A-17", cents: 4200 }]);
    assert.match(second.text, /refunded 4200 cents on A-17/);
  });

  it("runs a person's edit, not the model's arguments, and reports the edit", async () => {
    const client = new Assent(s.url, token);
    const gate = new AssentApprovals(client);
    const { decision, ran, resume } = await askRefund(gate, 9900);
    const { responses, second } = await resume(() =>
      assentOk(s, "edit", ...item(decision), "--args", JSON.stringify({ order: "A-17", cents: 3000 })),
    );
    assert.equal(responses[0]?.approved, true);
    assert.deepEqual(ran, [{ order: "A-17", cents: 3000 }]);
    assert.match(second.text, /refunded 3000 cents/);
    // The model's own arguments are not what was approved: a report of them is refused.
    const forged = { ...decision, args: { order: "A-17", cents: 9900 }, ranUrl: ranUrl(decision) };
    await assert.rejects(client.report(forged, { ok: true, result: "refunded" }), isConflict);
  });

  it("tells the model a person's rejection and its reason; nothing runs", async () => {
    const client = new Assent(s.url, token);
    const gate = new AssentApprovals(client);
    const { decision, ran, resume } = await askRefund(gate, 500000);
    const { responses, second } = await resume(() =>
      assentOk(s, "reject", ...item(decision), "--reason", "over the refund limit"),
    );
    assert.equal(responses[0]?.approved, false);
    assert.equal(responses[0]?.reason, "over the refund limit");
    assert.deepEqual(ran, []);
    assert.match(second.text, /execution-denied/);
    assert.match(second.text, /over the refund limit/);
    // A run reported for the rejected item is refused.
    const forged = { ...decision, ranUrl: ranUrl(decision) };
    await assert.rejects(client.report(forged, { ok: true, result: "refunded anyway" }), isConflict);
  });

  it("answers needsApproval the same on resume, and never runs a call Assent did not approve", async () => {
    const gate = new AssentApprovals(new Assent(s.url, token));
    const { id, ran, tools, model, messages, decision } = await askRefund(gate, 700);
    const request = messages
      .flatMap((message) => (message.role === "assistant" && typeof message.content !== "string" ? message.content : []))
      .find((part) => part.type === "tool-approval-request");
    assert.ok(request !== undefined && request.type === "tool-approval-request");
    // The application answers "yes" itself, while the person has not decided.
    messages.push({ role: "tool", content: [{ type: "tool-approval-response", approvalId: request.approvalId, approved: true }] });
    const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
    assert.deepEqual(ran, [], "a hand-written approval does not run the tool");
    assert.match(second.text, /not approved/);
    assert.equal(gate.decision(id)?.status, "pending", "the call still waits for a person");
    await assentOk(s, "reject", ...item(decision), "--reason", "cleanup");
  });

  it("refuses a report for another item than the approved one, and the chain verifies", async () => {
    const client = new Assent(s.url, token);
    const approved = await client.propose(LOOKUP, { order: "B-2" }, { toolCallId: callId() });
    assert.equal(approved.status, "approved");
    const gate = new AssentApprovals(client);
    const { decision } = await askRefund(gate, 100);
    // The pending item's run, reported with the approved call's arguments.
    const forged = { ...approved, ranUrl: ranUrl(decision) };
    await assert.rejects(client.report(forged, { ok: true, result: "done" }), isConflict);
    await client.report(approved, { ok: true, result: { order: "B-2", status: "shipped" } });
    // One approval, one report.
    await assert.rejects(client.report(approved, { ok: true, result: "again" }), isConflict);
    await assentOk(s, "reject", ...item(decision), "--reason", "cleanup");
    const verify = await assent(s, "audit", "verify");
    assert.equal(verify.code, 0, `audit verify: ${verify.stderr}${verify.stdout}`);
  });
});

/** Where the item's run would be reported, whatever the decision says. */
function ranUrl(decision: Decision): string {
  return `${s.url}/api/change-sets/${decision.changeSetId}/items/${decision.item}/ran`;
}

function isConflict(error: unknown): boolean {
  assert.ok(error instanceof AssentError, String(error));
  assert.equal(error.status, 409, error.message);
  return true;
}
