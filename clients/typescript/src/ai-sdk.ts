// The AI SDK adapter: a tool's `needsApproval` is answered by Assent, the SDK's
// `tool-approval-request` parts are answered with the person's decision as the
// `tool-approval-response` the SDK expects, and the approved call runs with the approved
// arguments (a person's edit included) and is reported back. `ai` is a peer dependency:
// its schema helper checks a person's edit against the tool's input schema.

import { asSchema, type Tool, type ToolApprovalResponse, type ToolSet } from "ai";
import { Assent, Denied, type Decision, type WaitOptions } from "./client.js";

export interface AiSdkGateOptions {
  /** The target the gated calls act on (default: the client's). */
  target?: string;
}

/** What Assent answered for one tool call, kept so that every question the SDK asks about
 * it gets the same answer: on resume the SDK calls `needsApproval` again and turns a
 * changed answer into a denial. */
interface Entry {
  needsApproval: boolean;
  decision: Decision;
  /** The arguments proposed, as canonical JSON: a call id reused for other arguments
   * is another call, which this decision does not cover. */
  proposed: string;
}

/** Gates AI SDK tools in Assent. Keep one per application (or per conversation): the
 * decisions it holds are looked up by `toolCallId` when the run resumes. */
export class AssentApprovals {
  readonly assent: Assent;
  readonly target: string | undefined;
  readonly #entries = new Map<string, Entry>();

  constructor(assent: Assent, options: AiSdkGateOptions = {}) {
    this.assent = assent;
    this.target = options.target;
  }

  /** Gate every tool of a set (each must have an `execute`: Assent gates what the
   * application runs itself). */
  tools<TOOLS extends ToolSet>(tools: TOOLS): TOOLS {
    const gated: Record<string, Tool> = {};
    for (const [name, tool] of Object.entries(tools)) {
      gated[name] = this.tool(name, tool);
    }
    return gated as TOOLS;
  }

  /** Gate one tool, under the name the model calls it by. */
  tool<T extends Tool>(name: string, tool: T): T {
    const execute = tool.execute;
    if (typeof execute !== "function") {
      throw new TypeError(`tool ${name} has no execute: Assent gates tools the application runs itself`);
    }
    const needsApproval = async (input: unknown, options: { toolCallId: string; messages?: unknown }) =>
      this.#needsApproval(name, input, options.toolCallId, options.messages);
    const schema = tool.inputSchema === undefined ? undefined : asSchema(tool.inputSchema);
    // The SDK validated the model's input; a person's edit is validated here, before the
    // tool sees it, as the model's would have been.
    const prepare = async (args: Record<string, unknown>): Promise<unknown> => {
      if (schema?.validate === undefined) {
        return args;
      }
      const checked = await schema.validate(args);
      if (!checked.success) {
        throw new Error(`${name} was not run: the approved arguments do not fit its input schema: ${checked.error.message}`);
      }
      return checked.value;
    };
    const gatedExecute = async (input: unknown, options: { toolCallId: string }) =>
      this.#execute(name, options.toolCallId, prepare, (args) => execute.call(tool, args as never, options as never));
    return { ...tool, needsApproval, execute: gatedExecute } as unknown as T;
  }

  /** The SDK's answers for the approval requests among `parts` (a result's `content`,
   * or its `response.messages`): each awaits the person's decision in Assent (a long
   * poll, woken by any door), and becomes `approved: true`, or `approved: false` with
   * the reason the model is told. Push them as `{ role: "tool", content: responses }`
   * and call `generateText`/`streamText` again to continue the run. */
  async responses(parts: readonly unknown[], options: WaitOptions = {}): Promise<ToolApprovalResponse[]> {
    const requests = approvalRequests(parts);
    return Promise.all(
      requests.map(async ({ approvalId, toolCallId }): Promise<ToolApprovalResponse> => {
        const entry = this.#entries.get(toolCallId);
        if (entry === undefined) {
          // Not a call this gate proposed (another tool's request, or another process's):
          // it is not answered here, and never approved on Assent's behalf.
          return { type: "tool-approval-response", approvalId, approved: false, reason: `Assent holds no decision for tool call ${toolCallId}` };
        }
        if (entry.decision.status === "pending" || entry.decision.status === "timed_out") {
          entry.decision = await this.assent.wait(entry.decision, options);
        }
        return approvalResponse(approvalId, entry.decision);
      }),
    );
  }

  /** What Assent decided for a tool call this gate proposed, if it did. */
  decision(toolCallId: string): Decision | undefined {
    return this.#entries.get(toolCallId)?.decision;
  }

  async #needsApproval(name: string, input: unknown, toolCallId: string, messages: unknown): Promise<boolean> {
    const known = this.#entries.get(toolCallId);
    if (known !== undefined) {
      if (known.proposed !== canonical(input)) {
        throw new Error(`${name}: tool call ${toolCallId} was proposed with other arguments; Assent's decision does not cover these`);
      }
      return known.needsApproval;
    }
    if (askedBefore(messages, toolCallId)) {
      // The conversation already asked about this call, but this process holds no
      // decision for it: answer the same (a changed answer is a denial to the SDK);
      // `execute` then refuses to run what it cannot prove approved.
      return true;
    }
    if (input === null || typeof input !== "object" || Array.isArray(input)) {
      throw new TypeError(`invalid input for ${name} (${toolCallId}): expected a JSON object`);
    }
    const args = input as Record<string, unknown>;
    const decision = await this.assent.propose(name, args, {
      toolCallId,
      wait: false,
      ...(this.target === undefined ? {} : { target: this.target }),
    });
    // Run at once only what the rules allowed at once; a wait and a denial both go
    // through the SDK's approval request, so the application sees (and the model is
    // told) every call that did not run.
    const entry: Entry = { needsApproval: decision.status !== "approved", decision, proposed: canonical(args) };
    this.#entries.set(toolCallId, entry);
    return entry.needsApproval;
  }

  async #execute(
    name: string,
    toolCallId: string,
    prepare: (args: Record<string, unknown>) => Promise<unknown>,
    run: (args: unknown) => unknown,
  ): Promise<unknown> {
    const entry = this.#entries.get(toolCallId);
    if (entry === undefined) {
      throw new Error(`${name} (${toolCallId}) was not run: this process holds no decision of Assent for it`);
    }
    if (!entry.decision.approved) {
      // An approval response written by hand (or a timed-out wait answered "yes") does
      // not make Assent's "no" or "not yet" a yes.
      throw new Denied(entry.decision);
    }
    // One approval, one run: a replay of the same tool call finds no decision.
    this.#entries.delete(toolCallId);
    const args = await prepare(entry.decision.args);
    return this.assent.runApproved(entry.decision, () => collect(run(args)));
  }
}

/** The SDK's approval response for a decision. */
function approvalResponse(approvalId: string, decision: Decision): ToolApprovalResponse {
  switch (decision.status) {
    case "approved": {
      const reason = decision.why ?? (decision.decidedBy === null ? "approved in Assent" : `approved by ${decision.decidedBy}`);
      return { type: "tool-approval-response", approvalId, approved: true, reason };
    }
    case "rejected":
      return { type: "tool-approval-response", approvalId, approved: false, reason: decision.reason ?? "rejected in Assent" };
    case "timed_out":
    case "pending":
      return {
        type: "tool-approval-response",
        approvalId,
        approved: false,
        reason: "nobody decided in time; the call still waits for a person in Assent",
      };
  }
}

interface ApprovalRequest {
  approvalId: string;
  toolCallId: string;
}

/** The approval requests among a result's content parts or response messages (the
 * content part names the call in `toolCall`, the message part in `toolCallId`). */
function approvalRequests(parts: readonly unknown[]): ApprovalRequest[] {
  const found: ApprovalRequest[] = [];
  const visit = (part: unknown): void => {
    if (part === null || typeof part !== "object") {
      return;
    }
    const record = part as Record<string, unknown>;
    if (Array.isArray(record.content)) {
      record.content.forEach(visit);
      return;
    }
    if (record.type !== "tool-approval-request" || typeof record.approvalId !== "string") {
      return;
    }
    const call = record.toolCall as Record<string, unknown> | undefined;
    const toolCallId = typeof record.toolCallId === "string" ? record.toolCallId : call?.toolCallId;
    if (typeof toolCallId === "string") {
      found.push({ approvalId: record.approvalId, toolCallId });
    }
  };
  parts.forEach(visit);
  return found;
}

function askedBefore(messages: unknown, toolCallId: string): boolean {
  return Array.isArray(messages) && approvalRequests(messages).some((request) => request.toolCallId === toolCallId);
}

/** A tool's result: a promise awaited, a streamed (async iterable) result read to its
 * last value, which is what the SDK hands the model. */
async function collect(result: unknown): Promise<unknown> {
  const value = await result;
  if (value !== null && typeof value === "object" && Symbol.asyncIterator in value) {
    let last: unknown;
    for await (const chunk of value as AsyncIterable<unknown>) {
      last = chunk;
    }
    return last;
  }
  return value;
}

/** JSON with every object's keys sorted: the same value gives the same text. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}
