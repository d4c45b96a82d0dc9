// The guide's AI SDK example (docs/guide/from-python-and-typescript.md, "TypeScript: the
// AI SDK": the chapter's block is `examples/ai-sdk.ts` byte for byte, which the Python
// package's test_examples.py checks) runs as written, importing the built package by its
// name, against a real `assent serve`: the model's refund waits, a person confirms it
// from another process, and the conversation ends with the tool's result.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { agent, assentOk, callId, scriptedModel, server } from "./harness.js";

describe("the guide's AI SDK example", () => {
  it("runs as written: a refund waits, is confirmed from another process, and runs", async () => {
    const s = server();
    const { name, token } = await agent(s, { refund: "ask" });
    process.env.ASSENT_URL = s.url;
    process.env.ASSENT_TOKEN = token;
    // Imported once the environment names the server: the example reads it at its top.
    const { chat } = await import("../examples/ai-sdk.js");

    const id = callId();
    const model = scriptedModel({ toolName: "refund", toolCallId: id, input: { order: "A-17", cents: 4200 } });
    const answer = chat(model, "Refund 42 EUR on A-17");
    // The person finds the agent's waiting call and confirms it.
    let set: string | undefined;
    while (set === undefined) {
      const pending = JSON.parse(await assentOk(s, "pending", "--json")) as { id: string; agentId: string }[];
      set = pending.find((candidate) => candidate.agentId === name)?.id;
      if (set === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    await assentOk(s, "confirm", set, "0");
    assert.match(await answer, /refunded 4200 cents on A-17/);
  });
});
