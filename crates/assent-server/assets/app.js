// The review page's behaviour: log in with the bearer token, list change sets, decide
// items, and follow live updates. Everything an agent wrote is untrusted: it reaches
// the page only as text (textContent, text nodes, attribute values), never as markup.
"use strict";
(() => {
  const TOKEN_KEY = "assent.token";
  const GROUPS = [
    ["status", "Status & priority", (t) => t === "set_task_status" || t === "update_task_priority"],
    ["checklist", "Checklist", (t) => t.includes("checklist")],
    ["dates", "Estimates & dates", (t) => t === "update_task_estimate" || t === "update_task_due_date"],
    ["labels", "Labels", (t) => t.includes("label")],
    ["other", "Other", () => true],
  ];
  const OPEN = new Set(["pending", "deferred"]);
  const OPEN_SET = new Set(["pending", "partiallyResolved"]);
  // Decided for good (assent_domain::ChangeItemStatus::is_decided); pending and
  // deferred items are still open.
  const DECIDED = new Set(["confirmed", "rejected", "retracted"]);
  // An item's status in people's words; its class keeps the wire name.
  const ITEM_WORDS = { pending: "waiting", confirmed: "confirmed", rejected: "rejected", deferred: "put off", retracted: "withdrawn" };

  let token = sessionStorage.getItem(TOKEN_KEY);
  let stream = null;
  const sets = new Map();
  const tasks = new Map();
  const drafts = new Map();
  const openForms = new Map();
  // Delegated requests waiting for an answer, by correlation id.
  const requests = new Map();
  // Rows whose "everything, whole" part is open, kept across re-renders.
  const expanded = new Set();

  const $ = (id) => document.getElementById(id);

  // Characters that make text lie to its reader: controls (other than newline and tab),
  // the Unicode bidirectional controls, which reorder what is shown, and invisible
  // format characters (zero-width, byte-order mark, line separators, tags), which hide
  // text. The domain's `misleads` is the one definition; a test of the server compares
  // this list with it, character by character.
  const MISLEADING = /[\u{0}-\u{8}\u{b}-\u{1f}\u{7f}-\u{9f}\u{ad}\u{61c}\u{180e}\u{200b}-\u{200f}\u{202a}-\u{202e}\u{2028}-\u{2029}\u{2060}-\u{2069}\u{feff}\u{fff9}-\u{fffb}\u{e0000}-\u{e007f}]/gu;

  // A string as nodes: text, with every misleading character marked as a visible code.
  function marked(value) {
    const nodes = [];
    let last = 0;
    for (const match of value.matchAll(MISLEADING)) {
      if (match.index > last) nodes.push(value.slice(last, match.index));
      const code = "U+" + match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      const mark = document.createElement("span");
      mark.className = "ctl";
      mark.title = "hidden character " + code + " in the agent's text";
      mark.textContent = code;
      nodes.push(mark);
      last = match.index + match[0].length;
    }
    if (last < value.length) nodes.push(value.slice(last));
    return nodes;
  }

  // An element with text children only; strings become text nodes.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "hidden") node.hidden = value;
      else node.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      if (typeof child === "string") node.append(...marked(child));
      else node.append(child);
    }
    return node;
  }

  function show(text) { $("notice").textContent = text || ""; }

  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch("/api" + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 401) { logout("The token was not accepted; log in again."); throw new Error("unauthorized"); }
    const type = response.headers.get("Content-Type") || "";
    const data = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok) throw new Error((data && data.detail) || response.statusText);
    return data;
  }

  // ---- login ------------------------------------------------------------------------

  async function login(event) {
    event.preventDefault();
    const candidate = $("token").value.trim();
    const check = await fetch("/api/session", { headers: { Authorization: "Bearer " + candidate } });
    if (!check.ok) { $("login-error").textContent = "That token was not accepted."; return; }
    const session = await check.json();
    if (session.role === "agent") {
      $("login-error").textContent = "That is an agent's token (agent " + session.agentId + "): it cannot review. Use a reviewer's or an admin's token.";
      return;
    }
    token = candidate;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    $("login-error").textContent = "";
    await start();
  }

  function logout(message) {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    if (stream) stream.abort();
    stream = null;
    sets.clear(); tasks.clear(); requests.clear();
    $("review").hidden = true; $("logout").hidden = true; $("login").hidden = false;
    $("role").hidden = true;
    $("login-error").textContent = message || "";
    setLive(false);
    $("token").focus();
  }

  async function start() {
    $("login").hidden = true; $("review").hidden = false; $("logout").hidden = false;
    const session = await api("GET", "/session");
    $("role").textContent = "signed in as " + session.role;
    $("role").hidden = false;
    await reload();
    follow();
  }

  // ---- data -------------------------------------------------------------------------

  async function reload() {
    const [open, waiting] = await Promise.all([api("GET", "/change-sets"), api("GET", "/confirmations")]);
    sets.clear();
    for (const set of open) sets.set(set.id, set);
    // Sets resolved by a confirmation whose external run still needs watching or a
    // person's answer (in doubt, failed) stay on the page.
    let jobs = [];
    try { jobs = await api("GET", "/jobs"); } catch (error) { jobs = []; }
    const unsettled = new Set(jobs.filter((j) => j.status !== "applied").map((j) => j.changeSetId));
    for (const id of unsettled) {
      if (!sets.has(id)) {
        try { sets.set(id, await api("GET", "/change-sets/" + encodeURIComponent(id))); } catch (error) { /* gone */ }
      }
    }
    requests.clear();
    for (const request of waiting) requests.set(request.correlationId, request);
    // Only the journal's targets (sets with a taskId) have a task to show beside them;
    // other hosts' sets show their target's kind and id.
    await Promise.all([...new Set(open.map((s) => s.taskId).filter(Boolean))].map(refreshTask));
    renderAll();
    renderRequests();
    refreshProof();
    refreshRefused();
  }

  // Calls refused without asking anyone in the last day, because a person rejected
  // exactly that call before: "refused again: rejected by alice on DATE, 'reason'".
  async function refreshRefused() {
    let listed;
    try { listed = await api("GET", "/rejections"); } catch (error) { return; }
    const list = $("refused");
    list.replaceChildren();
    for (const r of listed.refusedAgain) {
      let said = "refused again: rejected by " + (r.rejectedBy || "someone") + " on " + (r.rejectedAt || "another device");
      if (r.reason) said += ", '" + r.reason + "'";
      said += " (" + r.toolName + " " + JSON.stringify(r.args) + ", agent " + r.agentId + ", " + r.at + ")";
      list.append(el("li", {}, said));
    }
    $("refused-section").hidden = listed.refusedAgain.length === 0;
  }

  // The same proof as `assent audit verify`, run by the server: "verified", or the
  // first thing it found wrong.
  async function refreshProof() {
    const badge = $("proof");
    try {
      const report = await api("GET", "/audit/verify");
      if (report.verified) {
        badge.textContent = "verified";
        badge.title = report.entries + " entries, " + report.effectsChecked + " effects checked, head " + report.head;
        badge.className = "proof ok";
      } else {
        const first = report.violations[0];
        badge.textContent = "not verified: " + first.entry + " [" + first.rule + "] expected " + first.expected;
        badge.title = report.violations.length + " violation(s): run assent audit verify";
        badge.className = "proof bad";
      }
      badge.hidden = false;
    } catch (error) {
      badge.hidden = true;
    }
  }

  async function refreshTask(taskId) {
    try { tasks.set(taskId, await api("GET", "/tasks/" + encodeURIComponent(taskId))); }
    catch (error) { show("Could not load task " + taskId + ": " + error.message); }
  }

  async function upsert(set) {
    sets.set(set.id, set);
    if (set.taskId) await refreshTask(set.taskId);
    renderSet(set.id);
  }

  // Server-sent events over fetch, so the token travels in a header, never in a URL.
  async function follow() {
    if (stream) stream.abort();
    const controller = new AbortController();
    stream = controller;
    try {
      const response = await fetch("/api/events", {
        headers: { Authorization: "Bearer " + token }, signal: controller.signal,
      });
      if (!response.ok || !response.body) throw new Error("events: " + response.status);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          await dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    setLive(false);
    if (stream === controller && token) setTimeout(() => { if (stream === controller) follow(); }, 2000);
  }

  async function dispatch(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (name === "ready") { setLive(true); return; }
    if (name === "resync") { await reload(); return; }
    if (name === "changeSetCreated" || name === "changeSetUpdated") {
      // Events name the set; its content is fetched, so a stalled stream holds no sets.
      const { id } = JSON.parse(data.join("\n")).changeSet;
      let set;
      try { set = await api("GET", "/change-sets/" + encodeURIComponent(id)); }
      catch (error) { show("Could not load change set " + id + ": " + error.message); return; }
      if (OPEN_SET.has(set.status) || sets.has(id)) await upsert(set);
    } else if (name === "confirmationRequested") {
      const request = JSON.parse(data.join("\n")).request;
      requests.set(request.correlationId, request);
      renderRequests();
    } else if (name === "confirmationResolved") {
      requests.delete(JSON.parse(data.join("\n")).resolution.correlationId);
      renderRequests();
    }
  }

  function setLive(on) {
    $("live").textContent = on ? "live" : "offline";
    $("live").classList.toggle("on", on);
    document.body.dataset.live = on ? "true" : "false";
  }

  // ---- rendering --------------------------------------------------------------------

  // A set's status in people's words: how many of its items are decided.
  function setWords(set) {
    const n = set.items.length;
    const decided = set.items.filter((i) => DECIDED.has(i.status)).length;
    const putOff = set.items.filter((i) => i.status === "deferred").length;
    const count = decided + " of " + n + " decided" + (putOff ? ", " + putOff + " put off" : "");
    switch (set.status) {
      case "pending": return "waiting for you: " + count;
      case "partiallyResolved": return count;
      case "resolved": return "all decided";
      case "expired": return "expired";
      default: return set.status;
    }
  }

  // A value with nothing inside it: text, a number, a boolean or nothing at all.
  function plain(value) {
    return value === null || value === undefined || typeof value !== "object";
  }

  function plainText(value) {
    if (value === null || value === undefined) return "none";
    return typeof value === "string" ? value : String(value);
  }

  // A value as people read it, by its type, as nodes for el(): text as text, numbers
  // and booleans as written, a list of plain values as one comma-separated line (a list
  // of anything else as a list), an object as `key: value` lines, nested ones indented.
  // Never as JSON. `cut` fits each piece of text to its place (see `shortened`).
  function shown(value, cut) {
    if (plain(value)) return [cut(plainText(value))];
    if (Array.isArray(value)) {
      if (value.length === 0) return ["(empty list)"];
      if (value.every(plain)) return [cut(value.map(plainText).join(", "))];
      return [el("ul", { class: "value-list" }, ...value.map((v) => el("li", {}, ...shown(v, cut))))];
    }
    const entries = Object.entries(value);
    if (entries.length === 0) return ["(nothing)"];
    return [el("span", { class: "value-object" }, ...entries.map(([key, v]) =>
      el("span", { class: "value-line" }, cut(key) + ": ", ...shown(v, cut))))];
  }

  // How many characters of a summary or a value a row shows; the rest is one click away.
  const SHOWN_CHARS = 160;
  // How many characters of a diff a row shows, on lines of their own.
  const DIFF_CHARS = 4000;

  // A unified diff as the lines it has, each marked as added, removed or a hunk's head,
  // in a <pre>: a diff stays a diff (never one line joined with ⏎).
  function diffBlock(text) {
    const lines = text.split("\n").map((line) => {
      const kind = line.startsWith("@@") ? "hunk"
        : line.startsWith("+++") || line.startsWith("---") ? "file"
        : line.startsWith("+") ? "add"
        : line.startsWith("-") ? "del" : "ctx";
      return el("span", { class: "diff-line " + kind }, line + "\n");
    });
    return el("pre", { class: "diff" }, ...lines);
  }

  // `value` when it has at most `max` characters; otherwise its head and its tail around
  // a marker saying how many characters were left out, the same cut as the command
  // line's (assent_domain::head_and_tail): what is appended to a value, or where a path
  // ends, stays in sight.
  function headAndTail(value, max) {
    const chars = [...value];
    if (chars.length <= max) return value;
    const marker = (n) => " …[" + n + " chars cut]… ";
    const kept = Math.max(max - [...marker(chars.length)].length, 2);
    const head = Math.floor(kept / 2);
    const tail = kept - head;
    return chars.slice(0, head).join("") + marker(chars.length - head - tail) + chars.slice(chars.length - tail).join("");
  }

  // What a person decides on, cut to fit a row without hiding anything: `short(value)`
  // cuts to head and tail and remembers that it did; `full()` is then a <details> with
  // every part whole (its open state survives re-renders), or null when nothing was cut.
  function shortened(key, parts) {
    let cut = false;
    // How many characters, and lines, the cut values left out (issue 53: the page says
    // how much a person has not seen before they decide).
    let hiddenChars = 0;
    let hiddenLines = 0;
    // On one line, as the command line shows it: a newline in agent text is a ⏎.
    const short = (value) => {
      const shown = headAndTail(value, SHOWN_CHARS);
      if (shown !== value) {
        cut = true;
        const marker = shown.match(/…\[(\d+) chars cut\]…/);
        hiddenChars += marker ? Number(marker[1]) : 0;
        hiddenLines += value.split("\n").length - shown.split("\n").length;
      }
      return shown.replace(/\n/g, "⏎");
    };
    // A diff on its lines, cut (and counted as cut) only beyond DIFF_CHARS.
    const diff = (value) => {
      const kept = headAndTail(value, DIFF_CHARS);
      if (kept !== value) {
        cut = true;
        const marker = kept.match(/…\[(\d+) chars cut\]…/);
        hiddenChars += marker ? Number(marker[1]) : 0;
        hiddenLines += value.split("\n").length - kept.split("\n").length;
      }
      return diffBlock(kept);
    };
    const full = () => {
      if (!cut) return null;
      const rows = parts().flatMap(([label, value]) => [
        el("dt", {}, label),
        el("dd", {}, el("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2))),
      ]);
      const details = el("details", { class: "full",
        ontoggle: (e) => { if (e.target.open) expanded.add(key); else expanded.delete(key); } },
        el("summary", { class: "more", "data-focus-key": key + "/full" },
          "Cut to fit: " + hiddenChars + " characters" + (hiddenLines > 0 ? " (" + hiddenLines + " lines)" : "") +
          " not shown here; show everything whole"),
        el("dl", {}, ...rows));
      if (expanded.has(key)) details.open = true;
      return details;
    };
    return { short, full, diff };
  }

  // An item's or a request's arguments as [name, value] pairs (a non-object as one).
  function argPairs(args) {
    if (args && typeof args === "object" && !Array.isArray(args)) return Object.entries(args);
    return args === undefined || args === null ? [] : [["arguments", args]];
  }

  function taskLine(task) {
    if (!task) return "";
    const parts = ["status " + task.status];
    if (task.priority) parts.push("priority " + task.priority);
    if (task.estimateMinutes) parts.push("estimate " + task.estimateMinutes + " min");
    if (task.dueDate) parts.push("due " + task.dueDate);
    if (task.labels && task.labels.length) parts.push("labels " + task.labels.join(", "));
    if (task.checklist && task.checklist.length) {
      parts.push("checklist " + task.checklist.filter((c) => c.isChecked).length + "/" + task.checklist.length);
    }
    return parts.join(" · ");
  }

  let scrolledToLink = false;

  function renderAll() {
    const container = $("sets");
    container.replaceChildren(...[...sets.values()].sort((a, b) => b.createdAt.localeCompare(a.createdAt)).map(card));
    $("empty").hidden = sets.size > 0;
    // A webhook's link (`#change-set-<id>`) names a card that exists only once drawn;
    // scroll to it the first time only, not on every later update.
    const linked = !scrolledToLink && (location.hash.startsWith("#change-set-") || location.hash.startsWith("#item-")) && document.getElementById(location.hash.slice(1));
    if (linked) { linked.scrollIntoView(); scrolledToLink = true; }
  }

  function renderSet(id) {
    const existing = document.querySelector(`[data-set-id="${CSS.escape(id)}"]`);
    if (!existing) { renderAll(); return; }
    const focused = document.activeElement && document.activeElement.dataset.focusKey;
    existing.replaceWith(card(sets.get(id)));
    if (focused) {
      const again = document.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  function card(set) {
    const task = set.taskId ? tasks.get(set.taskId) : undefined;
    const name = task ? task.title : set.taskId || set.targetKind + " " + set.targetId;
    const open = set.items.filter((i) => OPEN.has(i.status)).length;
    const n = set.items.length;
    const node = el("article", { class: "card", id: "change-set-" + set.id, "data-set-id": set.id, "aria-label": "Change set for " + name },
      el("h3", { class: "task-title" }, name),
      el("p", { class: "task-state" }, taskLine(task)),
      el("p", { class: "suggests" }, `Agent ${set.agentId} suggests ${n} change${n === 1 ? "" : "s"}`),
      el("p", { class: "set-status " + set.status }, setWords(set)),
    );
    if (open > 0) {
      node.append(el("div", { class: "set-actions" },
        el("button", { type: "button", class: "primary", "data-focus-key": set.id + "/all", onclick: () => act(set, "/confirm-all") }, "Confirm all"),
        el("button", { type: "button", "data-focus-key": set.id + "/dismiss", onclick: () => toggleForm(set.id, "dismiss") }, "Dismiss…"),
      ));
      if (openForms.get(set.id) === "dismiss") {
        node.append(reasonForm(set.id + "/dismiss", "Why dismiss all open items?", "Dismiss",
          (reason) => act(set, "/dismiss", { reason }), () => toggleForm(set.id, "dismiss")));
      }
    }
    for (const [key, title, matches] of GROUPS) {
      const items = set.items.filter((item) => GROUPS.find((g) => g[2](item.toolName))[0] === key);
      if (items.length === 0) continue;
      node.append(el("section", { class: "group" }, el("h4", {}, title), el("ul", {}, ...items.map((item) => row(set, item)))));
    }
    return node;
  }

  // One item: its summary, and the value it replaces → the value it sets (an item with
  // several arguments shows each on a line of its own, so none hides behind another).
  function row(set, item) {
    const key = set.id + "/" + item.index;
    const path = "/items/" + item.index;
    const args = argPairs(item.args);
    const known = item.before !== undefined && item.before !== null;
    const { short, full, diff } = shortened(key, () => [["Summary", item.humanSummary], ...args,
      ...(known ? [["Before", item.before]] : [])]);
    // The value a change would set: its only argument, or all of them.
    const after = args.length === 1 ? args[0][1] : item.args;
    // A coding agent's file call stores the diff it makes: shown on its lines, always.
    const isDiff = known && set.targetKind === "workspace" && typeof item.before === "string";
    const changes = args.length <= 1 && !isDiff
      ? [el("span", { class: "change" }, ...(known ? shown(item.before, short) : ["—"]), " → ", ...shown(after, short))]
      // A coding agent's file call stores the diff it makes, not a value it replaces.
      : [known ? (isDiff
          ? el("span", { class: "change diff-change" }, "Diff:", diff(item.before))
          : el("span", { class: "change" }, "Before: ", ...shown(item.before, short))) : null,
        ...args.map(([name, value]) => el("span", { class: "change arg" }, short(name) + ": ", ...shown(value, short)))];
    // A stable anchor per item (`#item-<set>-<index>`): a phone door's View opens it.
    const li = el("li", { class: "item " + item.status, id: "item-" + set.id + "-" + item.index, "data-index": item.index },
      el("span", { class: "text" },
        // On a phone an item fills the screen without its set's card: who asks.
        el("span", { class: "item-agent" }, "Agent " + set.agentId),
        // The tool's name, always: a host's summary may start with a title of its
        // choosing ("Read the README" on delete_all_files).
        el("code", { class: "tool-name" }, item.toolName),
        " ",
        el("span", { class: "summary" }, short(item.humanSummary)),
        ...changes,
        item.reason ? el("span", { class: "change reason-text" }, "Reason: " + item.reason) : null),
      el("span", { class: "badge " + item.status }, ITEM_WORDS[item.status] || item.status),
    );
    const whole = full();
    if (whole) li.append(whole);
    // The tool's definition changed since a person allowed it (an MCP server described
    // it anew under the same name): say so beside the decision it asks for.
    if (item.toolChanged) {
      li.append(el("span", { class: "badge tool-changed", title: "Its server changed how it describes this tool since a person allowed it; `assent agent allow` accepts the new definition." },
        "tool changed since allowed"));
    }
    // The target changed since the proposal: nothing was applied to what it became,
    // and the change above already shows the target as it is now.
    if (item.stale) {
      li.append(el("span", { class: "change stale" }, "Changed since proposed: " + (item.staleDetail || "")));
    }
    // A person's edit under a quorum: the arguments above are the ones that run, and the
    // next approver is told whose they are (the agent's stay in the full view).
    if (item.editedBy) {
      li.append(el("span", { class: "badge edited", title: "The agent proposed: " + plainText(item.proposedArgs) },
        "edited by " + item.editedBy));
    }
    // A tool that needs more than one person: how far its current revision is.
    if (item.approvalsNeeded && OPEN.has(item.status)) {
      const by = (item.approvals || []).map((a) => a.by).join(", ");
      li.append(el("span", { class: "badge approvals", title: by ? "Approved by " + by : "No approval yet" },
        `${(item.approvals || []).length} of ${item.approvalsNeeded} approvals`));
    }
    if (item.execution) li.append(execution(set, item));
    // An applied item whose tool declares its reversal: propose it as a new set, which
    // a person then reviews like any other.
    if (item.undoable) {
      li.append(el("span", { class: "buttons" },
        el("button", { type: "button", class: "undo", "data-focus-key": key + "/undo", "aria-label": "Undo: " + item.toolName + ": " + item.humanSummary,
          title: "Propose the reversal of this change for review", onclick: () => undo(set, path + "/undo") }, "Undo")));
    }
    // A held confirmation is taken back with its Undo, not decided again.
    const held = item.execution && item.execution.status === "scheduled";
    if (OPEN.has(item.status) && !held) {
      li.append(el("span", { class: "buttons" },
        el("button", { type: "button", class: "confirm", "data-focus-key": key + "/confirm", "aria-label": "Confirm: " + item.toolName + ": " + item.humanSummary, title: "Confirm", onclick: () => act(set, path + "/confirm", { revision: item.revision || 0 }) }, "✓"),
        // A coding agent's call: "yes, for this session" also runs the same command
        // (or the same file's call) of this session unasked from now on, whatever
        // free-text description the agent gives it.
        set.session ? el("button", { type: "button", class: "confirm for-session", "data-focus-key": key + "/session",
          "aria-label": "Confirm for this session: " + item.toolName + ": " + item.humanSummary, title: "Confirm, and run this same " + (item.args && typeof item.args.command === "string" ? "command" : "call") + " again without asking (whatever its description) for the rest of session " + set.session,
          onclick: () => act(set, path + "/confirm", { revision: item.revision || 0, forSession: true }) }, "✓ session") : null,
        el("button", { type: "button", class: "reject", "data-focus-key": key + "/reject", "aria-label": "Reject: " + item.toolName + ": " + item.humanSummary, title: "Reject", onclick: () => toggleForm(key, "reject") }, "✗"),
        el("button", { type: "button", class: "edit", "data-focus-key": key + "/edit", "aria-label": "Edit: " + item.toolName + ": " + item.humanSummary, onclick: () => toggleForm(key, "edit") }, "Edit"),
      ));
      if (openForms.get(key) === "reject") {
        li.append(reasonForm(key + "/reason", "Reason (the agent reads it next time)", "Reject",
          (reason) => act(set, path + "/reject", { reason }), () => toggleForm(key, "reject")));
      } else if (openForms.get(key) === "edit") {
        li.append(editForm(set, item, key));
      }
    }
    return li;
  }

  // A confirmed item of a tool with an external effect: how its run stands, and what a
  // person may do about it (settle one in doubt; retry or retract a failed one).
  const RUN_LABELS = { approved: "approved", running: "running", applied: "applied", failed: "failed", inDoubt: "in doubt", retracted: "retracted", scheduled: "held" };

  // Seconds left of a held confirmation's window (at least 0).
  function secondsLeft(notBefore) {
    return Math.max(0, Math.ceil((Date.parse(notBefore) - Date.now()) / 1000));
  }

  // Redraws the "Undo (12 s)" buttons once a second while any window is open; a
  // button whose window has ended disappears with the job's next update.
  setInterval(() => {
    for (const button of document.querySelectorAll("button.cancel-hold")) {
      const left = secondsLeft(button.dataset.notBefore);
      button.textContent = `Undo (${left} s)`;
      button.disabled = left === 0;
    }
  }, 1000);

  function execution(set, item) {
    const run = item.execution;
    const key = set.id + "/" + item.index + "/job";
    const job = (verb, label, body) => el("button", { type: "button", "data-focus-key": key + "/" + label,
      onclick: () => jobAct(set, run.jobId, "/" + verb, body) }, label);
    const detail = run.status === "applied" ? run.result : run.lastError;
    if (run.status === "scheduled") {
      // Confirmed, held: it runs when the window ends unless a person takes it back.
      const left = secondsLeft(run.notBefore);
      const button = el("button", { type: "button", class: "cancel-hold", "data-not-before": run.notBefore, "data-focus-key": key + "/cancel",
        "aria-label": "Undo the confirmation of: " + item.toolName + ": " + item.humanSummary, title: "Cancel before it runs: the item ends rejected",
        onclick: () => jobAct(set, run.jobId, "/cancel") }, `Undo (${left} s)`);
      button.disabled = left === 0;
      return el("span", { class: "execution scheduled" },
        el("span", { class: "badge scheduled" }, "confirmed; runs at " + new Date(run.notBefore).toLocaleTimeString()),
        el("span", { class: "buttons" }, button));
    }
    if (run.outcome) {
      // A coding agent's call: the agent runs it; how it went, in the words of a call.
      return el("span", { class: "execution " + run.status },
        el("span", { class: "badge " + run.status }, run.outcome));
    }
    return el("span", { class: "execution " + run.status },
      el("span", { class: "badge " + run.status }, "run: " + (RUN_LABELS[run.status] || run.status) + " (attempt " + run.attempts + ")"),
      detail ? el("span", { class: "change" }, detail) : null,
      run.status === "inDoubt" ? el("span", { class: "buttons" },
        job("resolve", "It happened", { resolution: "happened" }),
        job("resolve", "Run it again", { resolution: "rerun" })) : null,
      run.status === "failed" ? el("span", { class: "buttons" },
        job("retry", "Retry"),
        job("retract", "Retract")) : null);
  }

  async function jobAct(set, jobId, suffix, body) {
    show("");
    try {
      await api("POST", "/jobs/" + encodeURIComponent(jobId) + suffix, body === undefined ? {} : body);
      await upsert(await api("GET", "/change-sets/" + encodeURIComponent(set.id)));
    } catch (error) {
      if (error.message !== "unauthorized") show(error.message);
    }
  }

  function reasonForm(key, label, verb, submit, cancel) {
    const input = el("input", { type: "text", class: "reason", "data-focus-key": key, "aria-label": label, placeholder: label,
      oninput: (e) => drafts.set(key, e.target.value) });
    input.value = drafts.get(key) || "";
    return el("form", { class: "inline-form", onsubmit: (e) => { e.preventDefault(); drafts.delete(key); submit(input.value); },
      onkeydown: (e) => { if (e.key === "Escape") cancel(); } },
      input,
      el("span", { class: "row" },
        el("button", { type: "submit", class: "reject" }, verb),
        el("button", { type: "button", onclick: cancel }, "Cancel")));
  }

  function editForm(set, item, key) {
    const area = el("textarea", { class: "args", "data-focus-key": key + "/args", "aria-label": "Arguments (JSON)",
      oninput: (e) => drafts.set(key + "/args", e.target.value) });
    area.value = drafts.get(key + "/args") || JSON.stringify(item.args, null, 2);
    return el("form", { class: "inline-form", onsubmit: (e) => {
        e.preventDefault();
        let args;
        try { args = JSON.parse(area.value); } catch (error) { show("The arguments are not valid JSON: " + error.message); return; }
        drafts.delete(key + "/args");
        act(set, "/items/" + item.index + "/edit", { args, revision: item.revision || 0 });
      }, onkeydown: (e) => { if (e.key === "Escape") toggleForm(key, "edit"); } },
      area,
      el("span", { class: "row" },
        el("button", { type: "submit", class: "confirm" }, "Save and confirm"),
        el("button", { type: "button", onclick: () => toggleForm(key, "edit") }, "Cancel")));
  }

  function toggleForm(key, kind) {
    const opening = openForms.get(key) !== kind;
    if (opening) openForms.set(key, kind); else openForms.delete(key);
    const setId = key.split("/")[0];
    renderSet(setId);
    const target = opening ? document.querySelector(`[data-focus-key^="${CSS.escape(key)}/"]:is(input, textarea)`) : null;
    if (target) target.focus();
  }

  async function act(set, suffix, body) {
    show("");
    try {
      await api("POST", "/change-sets/" + encodeURIComponent(set.id) + suffix, body === undefined ? undefined : body);
      for (const key of [...openForms.keys()]) if (key.startsWith(set.id)) openForms.delete(key);
      await upsert(await api("GET", "/change-sets/" + encodeURIComponent(set.id)));
    } catch (error) {
      if (error.message === "unauthorized") return;
      show(error.message);
      // A refusal may come from a change made elsewhere (an edit, a refresh): show the
      // item as it is now, so the next decision is on what runs.
      try { await upsert(await api("GET", "/change-sets/" + encodeURIComponent(set.id))); } catch (_) { /* shown above */ }
    }
  }

  // Proposes an applied item's reversal: the new set is shown at once (the event that
  // announces it may come later), and the original is read again.
  async function undo(set, suffix) {
    show("");
    try {
      const reversal = await api("POST", "/change-sets/" + encodeURIComponent(set.id) + suffix);
      await upsert(reversal);
      await upsert(await api("GET", "/change-sets/" + encodeURIComponent(set.id)));
    } catch (error) {
      if (error.message !== "unauthorized") show(error.message);
    }
  }

  // ---- delegated requests ----------------------------------------------------------

  function renderRequests() {
    const focused = document.activeElement && document.activeElement.dataset.focusKey;
    $("requests").replaceChildren(...[...requests.values()].map(requestCard));
    $("asking").hidden = requests.size === 0;
    if (focused) {
      const again = document.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  // Everything in a request comes from a sub-agent: text only.
  function requestCard(request) {
    const id = request.correlationId;
    const key = "request/" + id;
    const call = request.toolCall || {};
    const args = argPairs(call.args);
    const { short, full } = shortened(key, () => [["Summary", request.summary], ...args]);
    // One argument a line, each value by its type and cut to fit.
    const shownArgs = el("span", { class: "args" }, ...args.map(([name, value]) =>
      el("span", { class: "value-line" }, short(name) + ": ", ...shown(value, short))));
    const li = el("li", { class: "request", "data-correlation-id": id },
      el("span", { class: "agent-path" }, request.agentPath),
      el("span", { class: "summary" }, short(request.summary)),
      el("span", { class: "tool" }, call.name),
      shownArgs,
      el("span", { class: "buttons" },
        el("button", { type: "button", class: "confirm allow-once", "data-focus-key": key + "/once",
          "aria-label": "Allow once: " + request.summary, onclick: () => answer(id, { kind: "proceedOnce" }) }, "Allow once"),
        el("button", { type: "button", class: "allow-always", "data-focus-key": key + "/always",
          "aria-label": "Always allow " + call.name + " for " + request.agentPath, onclick: () => answer(id, { kind: "proceedAlways" }) }, "Always"),
        el("button", { type: "button", class: "reject", "data-focus-key": key + "/reject",
          "aria-label": "Reject: " + request.summary, onclick: () => toggleRequestForm(key) }, "Reject…")),
    );
    const whole = full();
    if (whole) li.append(whole);
    if (openForms.get(key) === "reject") {
      li.append(reasonForm(key + "/reason", "Reason (the sub-agent reads it)", "Reject",
        (reason) => answer(id, { kind: "reject", reason }), () => toggleRequestForm(key)));
    }
    return li;
  }

  function toggleRequestForm(key) {
    const opening = openForms.get(key) !== "reject";
    if (opening) openForms.set(key, "reject"); else openForms.delete(key);
    renderRequests();
    const target = opening ? document.querySelector(`[data-focus-key="${CSS.escape(key + "/reason")}"]`) : null;
    if (target) target.focus();
  }

  async function answer(id, outcome) {
    show("");
    try {
      await api("POST", "/confirmations/" + encodeURIComponent(id), { outcome });
      openForms.delete("request/" + id);
      requests.delete(id);
      renderRequests();
    } catch (error) {
      if (error.message !== "unauthorized") show(error.message);
    }
  }

  // Installable: the service worker keeps the page's shell only (see /sw.js); where
  // there is none (plain HTTP beyond loopback), the page works as before.
  if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", login);
    $("logout").addEventListener("click", () => logout(""));
    setLive(false);
    if (token) start().catch((error) => show(error.message));
  });
})();
