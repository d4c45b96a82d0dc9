// The TypeScript client alone, against a real `assent serve`: `gate` runs a function
// with the approved arguments and reports it, throws `Denied` for a rejection, and a
// wait that outlasts the client's limit answers `timed_out` while the item keeps
// waiting for a person.

import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { Assent, AssentError, Denied } from "../src/index.js";
import { agent, assentOk, callId, server, type Server } from "./harness.js";

const READ = "ts_read";
const WRITE = "ts_write";

let s: Server;
/** The token of this file's agent (its own, with its own rules). */
let token: string;

before(async () => {
  s = server();
  token = (await agent(s, { [READ]: "allow", [WRITE]: "ask" })).token;
});

describe("the client", () => {
  it("gates a function: a call the rules allow runs with its arguments and is reported", async () => {
    const client = new Assent(s.url, token);
    const seen: unknown[] = [];
    const read = client.gate(READ, async (args: { path: string }) => {
      seen.push(args);
      return `contents of ${args.path}`;
    });
    assert.equal(await read({ path: "notes.txt" }), "contents of notes.txt");
    assert.deepEqual(seen, [{ path: "notes.txt" }]);
  });

  it("times out on its own limit, and a later wait gets the person's decision", async () => {
    const client = new Assent(s.url, token, { pollSecs: 1 });
    const pending = await client.propose(WRITE, { path: "notes.txt" }, { toolCallId: callId(), timeoutMs: 1000 });
    assert.equal(pending.status, "timed_out");
    assert.equal(pending.approved, false);
    await assentOk(s, "edit", pending.changeSetId ?? "", String(pending.item), "--args", JSON.stringify({ path: "other.txt" }));
    const decided = await client.wait(pending);
    assert.equal(decided.status, "approved");
    assert.equal(decided.edited, true);
    assert.deepEqual(decided.args, { path: "other.txt" });
    const ran = await client.runApproved(decided, () => "written");
    assert.equal(ran, "written");
  });

  it("throws Denied with the person's reason, and runs nothing", async () => {
    const client = new Assent(s.url, token);
    let ran = false;
    const write = client.gate(WRITE, () => {
      ran = true;
    });
    const path = `secrets-${callId()}.txt`;
    // Its refusal is awaited from the start: the decision may land before the person's
    // command has ended.
    const refused = assert.rejects(write({ path }), (error: unknown) => {
      assert.ok(error instanceof Denied, String(error));
      assert.equal(error.decision.reason, "not that file");
      return true;
    });
    // The person finds the call among the pending ones, from another process.
    let set: { id: string } | undefined;
    while (set === undefined) {
      const pending = JSON.parse(await assentOk(s, "pending", "--json")) as unknown;
      set = findSet(pending, path);
      if (set === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    await assentOk(s, "reject", set.id, "0", "--reason", "not that file");
    await refused;
    assert.equal(ran, false);
  });

  it("refuses a bad URL, and says what the server refused", async () => {
    assert.throws(() => new Assent("localhost:7700", token), TypeError);
    const stranger = new Assent(s.url, "not-a-token-of-this-server");
    await assert.rejects(stranger.propose(READ, { path: "x" }), (error: unknown) => {
      assert.ok(error instanceof AssentError);
      assert.equal(error.status, 401);
      return true;
    });
  });
});

/** The pending set whose JSON mentions `needle`, in `assent pending --json`'s answer. */
function findSet(pending: unknown, needle: string): { id: string } | undefined {
  const sets = Array.isArray(pending) ? pending : ((pending as { changeSets?: unknown[] }).changeSets ?? []);
  for (const set of sets as Record<string, unknown>[]) {
    if (JSON.stringify(set).includes(needle)) {
      const id = set.id ?? set.changeSetId;
      if (typeof id === "string") {
        return { id };
      }
    }
  }
  return undefined;
}
