// The client of Assent's HTTP contract for client-executed calls (the guide's chapter
// "From Python and TypeScript"): propose a call, await the person's decision, run the
// tool with the approved arguments, report the run. Only `fetch`, no dependencies.

/** Where a proposed call stands. */
export type DecisionStatus = "approved" | "rejected" | "timed_out" | "pending";

/** The server's answer for one call, as `POST /api/calls` and the decision URL give it. */
export interface DecisionJson {
  decision: "run" | "ask" | "deny";
  why?: string | null;
  tool: string;
  args: Record<string, unknown>;
  edited?: boolean;
  reason?: string | null;
  decidedBy?: string | null;
  toolCallId?: string | null;
  runKey: string;
  changeSetId?: string | null;
  item?: number | null;
  revision?: number | null;
  ranUrl?: string | null;
  outcomeUrl?: string | null;
  waitsUntil?: string | null;
  message?: unknown;
}

/** What Assent decided for one call. */
export interface Decision {
  /** `approved` (run it, with `args`), `rejected`, `pending` (a person decides), or
   * `timed_out` (the client's own limit ran out; the item still waits in Assent). */
  readonly status: DecisionStatus;
  /** Whether the tool may run now. */
  readonly approved: boolean;
  /** The arguments to run with: a person's edit when `edited`. */
  readonly args: Record<string, unknown>;
  readonly edited: boolean;
  /** Why a call was rejected, in words for the model. */
  readonly reason: string | null;
  /** The person who confirmed or rejected, when a person did. */
  readonly decidedBy: string | null;
  /** Which rule or person decided, in words for a person. */
  readonly why: string | null;
  readonly tool: string;
  readonly toolCallId: string | null;
  readonly runKey: string;
  readonly changeSetId: string | null;
  readonly item: number | null;
  readonly revision: number | null;
  /** Where to report the run (absolute). */
  readonly ranUrl: string | null;
  /** Where to await the decision (absolute). */
  readonly outcomeUrl: string | null;
  /** The server's JSON, as it came. */
  readonly raw: DecisionJson;
}

/** A request to Assent failed: `status` is the HTTP status (0 when none came back). */
export class AssentError extends Error {
  readonly status: number;
  readonly detail: string;
  constructor(status: number, detail: string) {
    super(status === 0 ? detail : `Assent answered ${status}: ${detail}`);
    this.name = "AssentError";
    this.status = status;
    this.detail = detail;
  }
}

/** A gated call Assent did not approve; the decision says why. */
export class Denied extends Error {
  readonly decision: Decision;
  constructor(decision: Decision) {
    super(
      decision.status === "rejected"
        ? `${decision.tool} was not approved: ${decision.reason ?? "no reason given"}`
        : `${decision.tool} was not approved: it still waits for a person in Assent`,
    );
    this.name = "Denied";
    this.decision = decision;
  }
}

export interface AssentOptions {
  /** The target calls act on, unless a call names its own (default `"default"`). */
  target?: string;
  /** How long `propose` and `wait` await a person, in milliseconds (default 10 min). */
  timeoutMs?: number;
  /** The longest single long poll, in seconds (at most 60; default 30). */
  pollSecs?: number;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

export interface ProposeOptions {
  target?: string;
  /** The framework's id of the call, kept in the record. */
  toolCallId?: string;
  /** Await a person when the rules ask (default true); false answers `pending` at once. */
  wait?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface WaitOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface RunReport {
  ok: boolean;
  /** The tool's result, when it succeeded (any JSON). */
  result?: unknown;
  /** What went wrong, when it did not. */
  error?: string;
  /** The arguments it ran with; default: the decision's (approved) ones. */
  args?: Record<string, unknown>;
}

export interface Recorded {
  recorded: boolean;
  changeSetId: string | null;
  item: number | null;
  runKey: string;
}

/** The server's longest long poll, in seconds. */
const MAX_POLL_SECS = 60;

/** An Assent server, seen by one client application (its agent token). */
export class Assent {
  readonly url: string;
  readonly target: string;
  readonly timeoutMs: number;
  readonly pollSecs: number;
  readonly #token: string;
  readonly #fetch: typeof fetch;

  constructor(url: string, token: string, options: AssentOptions = {}) {
    if (!/^https?:\/\//.test(url)) {
      throw new TypeError(`invalid Assent URL ${JSON.stringify(url)}: expected http(s)://HOST[:PORT]`);
    }
    if (token.length === 0) {
      throw new TypeError("empty Assent token: expected an agent token");
    }
    const pollSecs = options.pollSecs ?? 30;
    if (!Number.isInteger(pollSecs) || pollSecs < 1 || pollSecs > MAX_POLL_SECS) {
      throw new TypeError(`invalid pollSecs ${pollSecs}: expected 1 to ${MAX_POLL_SECS}`);
    }
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.target = options.target ?? "default";
    this.timeoutMs = options.timeoutMs ?? 600_000;
    this.pollSecs = pollSecs;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Propose one call: the rules decide at once, or (with `wait`) a person does. */
  async propose(
    tool: string,
    args: Record<string, unknown>,
    options: ProposeOptions = {},
  ): Promise<Decision> {
    if (args === null || typeof args !== "object" || Array.isArray(args)) {
      throw new TypeError(`invalid arguments for ${tool}: expected a JSON object`);
    }
    const body: Record<string, unknown> = {
      tool,
      args,
      target: options.target ?? this.target,
      executedBy: "client",
    };
    if (options.toolCallId !== undefined) {
      body.toolCallId = options.toolCallId;
    }
    const json = (await this.#request("POST", "/api/calls", body, options.signal)) as DecisionJson;
    const decision = this.#decision(json);
    if (decision.status !== "pending" || options.wait === false) {
      return decision;
    }
    return this.wait(decision, { timeoutMs: options.timeoutMs, signal: options.signal });
  }

  /** Await a person's decision on a pending call (a long poll, woken by any door's
   * decision); `timed_out` when `timeoutMs` runs out first. */
  async wait(decision: Decision, options: WaitOptions = {}): Promise<Decision> {
    if (decision.status !== "pending" && decision.status !== "timed_out") {
      return decision;
    }
    const outcomeUrl = decision.outcomeUrl;
    if (outcomeUrl === null) {
      throw new AssentError(0, `call ${decision.runKey} has no decision to await`);
    }
    const deadline = Date.now() + (options.timeoutMs ?? this.timeoutMs);
    for (;;) {
      const left = Math.ceil((deadline - Date.now()) / 1000);
      if (left <= 0) {
        return { ...decision, status: "timed_out", approved: false };
      }
      const wait = Math.min(left, this.pollSecs);
      const url = `${outcomeUrl}${outcomeUrl.includes("?") ? "&" : "?"}wait=${wait}`;
      const json = (await this.#request("GET", url, undefined, options.signal)) as DecisionJson;
      const next = this.#decision(json);
      if (next.status !== "pending") {
        return next;
      }
      decision = next;
    }
  }

  /** Report the run of an approved call: the arguments it ran with and its outcome.
   * Assent refuses (409) a report for a call it did not approve, with other arguments,
   * or a second one. */
  async report(decision: Decision, run: RunReport): Promise<Recorded> {
    if (decision.ranUrl === null) {
      throw new AssentError(0, `call ${decision.runKey} has nowhere to report a run: it was not approved`);
    }
    const body: Record<string, unknown> = { args: run.args ?? decision.args, ok: run.ok };
    if (run.ok) {
      body.result = run.result ?? null;
    } else {
      body.error = run.error ?? "failed";
    }
    return (await this.#request("POST", decision.ranUrl, body)) as Recorded;
  }

  /** Gate a function: each call is proposed (its one argument object as the call's
   * arguments), awaited, run with the approved arguments (a person's edit included) and
   * reported; a call not approved throws `Denied`. */
  gate<A extends Record<string, unknown>, R>(
    tool: string,
    run: (args: A) => R | Promise<R>,
    options: Omit<ProposeOptions, "wait" | "toolCallId"> = {},
  ): (args: A) => Promise<R> {
    return async (args: A) => {
      const decision = await this.propose(tool, args, options);
      if (!decision.approved) {
        throw new Denied(decision);
      }
      return this.runApproved(decision, () => run(decision.args as A));
    };
  }

  /** Run an approved call and report it: its result, or the error it threw (rethrown). */
  async runApproved<R>(decision: Decision, run: () => R | Promise<R>): Promise<R> {
    if (!decision.approved) {
      throw new Denied(decision);
    }
    let result: R;
    try {
      result = await run();
    } catch (error) {
      await this.report(decision, { ok: false, error: errorText(error) });
      throw error;
    }
    await this.report(decision, { ok: true, result: toJson(result) });
    return result;
  }

  #decision(json: DecisionJson): Decision {
    if (json === null || typeof json !== "object" || typeof json.decision !== "string") {
      throw new AssentError(0, `unexpected answer from Assent: ${JSON.stringify(json)}`);
    }
    const status: DecisionStatus =
      json.decision === "run"
        ? "approved"
        : json.decision === "deny"
          ? "rejected"
          : json.decision === "ask"
            ? "pending"
            : unknownDecision(json.decision);
    return {
      status,
      approved: status === "approved",
      args: json.args ?? {},
      edited: json.edited ?? false,
      reason: json.reason ?? null,
      decidedBy: json.decidedBy ?? null,
      why: json.why ?? null,
      tool: json.tool,
      toolCallId: json.toolCallId ?? null,
      runKey: json.runKey,
      changeSetId: json.changeSetId ?? null,
      item: json.item ?? null,
      revision: json.revision ?? null,
      ranUrl: this.#absolute(json.ranUrl),
      outcomeUrl: this.#absolute(json.outcomeUrl),
      raw: json,
    };
  }

  #absolute(path: string | null | undefined): string | null {
    if (path === null || path === undefined) {
      return null;
    }
    return /^https?:\/\//.test(path) ? path : `${this.url}${path}`;
  }

  async #request(method: string, pathOrUrl: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const url = /^https?:\/\//.test(pathOrUrl) ? pathOrUrl : `${this.url}${pathOrUrl}`;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#token}`,
      accept: "application/json",
    };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
    }
    let response: Response;
    try {
      response = await this.#fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw new AssentError(0, `${method} ${url} failed: ${errorText(error)}`);
    }
    const text = await response.text();
    if (!response.ok) {
      throw new AssentError(response.status, problemDetail(text));
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new AssentError(response.status, `not JSON: ${text.slice(0, 200)}`);
    }
  }
}

function unknownDecision(decision: string): never {
  throw new AssentError(0, `unknown decision ${JSON.stringify(decision)} from Assent`);
}

/** An RFC 9457 problem's `detail` (or `title`), else the body's start. */
function problemDetail(text: string): string {
  try {
    const problem = JSON.parse(text) as { detail?: unknown; title?: unknown };
    if (typeof problem.detail === "string") {
      return problem.detail;
    }
    if (typeof problem.title === "string") {
      return problem.title;
    }
  } catch {
    // Not a problem document: the text itself says what went wrong.
  }
  return text.slice(0, 500);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A result as JSON can carry it (a value `JSON.stringify` drops becomes null). */
function toJson(value: unknown): unknown {
  if (value === undefined) {
    return null;
  }
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return String(value);
  }
}
