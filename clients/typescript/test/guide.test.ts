// The guide's AI SDK example (docs/guide/from-python-and-typescript.md, the `ts` block
// of "TypeScript: the AI SDK") runs as written, importing the built package by its name,
// against a real `assent serve`: the model's refund waits, a person confirms it from
// another process, and the conversation ends with the tool's result.

import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { describe, it } from "node:test";
import ts from "typescript";
import { agent, assentOk, callId, scriptedModel, server } from "./harness.js";

const GUIDE = new URL("../../../../docs/guide/from-python-and-typescript.md", import.meta.url);
const HEADING = "## TypeScript: the AI SDK";

/** The first `ts` block after the heading. */
function example(markdown: string): string {
  const section = markdown.slice(markdown.indexOf(HEADING));
  assert.ok(section.startsWith(HEADING), `the guide has a section "${HEADING}"`);
  const block = /```ts\n([\s\S]*?)\n```/.exec(section);
  assert.ok(block?.[1] !== undefined, "the section has a ts block");
  return block[1];
}

describe("the guide's AI SDK example", () => {
  it("runs as written: a refund waits, is confirmed from another process, and runs", async () => {
    const s = server();
    const { name, token } = await agent(s, { refund: "ask" });
    process.env.ASSENT_URL = s.url;
    process.env.ASSENT_TOKEN = token;
    const source = example(await readFile(GUIDE, "utf8"));
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    // Inside the package, so that `@assent/client` resolves to this build (its `dist`).
    const file = new URL("../guide-example.mjs", import.meta.url);
    await writeFile(file, js);
    const { chat } = (await import(file.href)) as { chat: (model: unknown, prompt: string) => Promise<string> };

    const id = callId();
    const model = scriptedModel({ toolName: "refund", toolCallId: id, input: { order: "A-17", cents: 4200 } });
    const answer = chat(model, "Refund 42 EUR on A-17");
    // The person finds the call among the pending ones and confirms it.
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
