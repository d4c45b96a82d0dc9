//! Human output: tasks, wakes, change sets, decisions, the audit trail and the outbox
//! as text for a person (the `--json` output is the types' own serialization).

use assent_confirm::admin::{ConflictRecord, ImportReport, OutboxMessage, Peer};
use assent_confirm::agents::HostTool;
use assent_confirm::grants::Grant;
use assent_confirm::records::{Job, JobStatus, Quorum, Revision};
use assent_confirm::{
    ConfirmAllResult, ConfirmOutcome, ExecutionOutcome, ItemResult, SetRecord, WakeOutcome,
    WakeRequest,
};
use assent_domain::{
    ChangeDecision, ChangeItem, ChangeSet, OffsetDateTime, Uuid, Verdict, canonical_json,
    head_and_tail, named_summary, one_line,
};
use assent_journal::TaskSnapshot;
use assent_tools::AuditRecord;
use serde_json::Value;
use time::macros::format_description;
use time::{Duration, UtcOffset};

/// Longest cell of a table column before it is cut with `…`.
const MAX_CELL_CHARS: usize = 60;

/// `2026-03-02 09:00:00Z`.
pub fn time(at: OffsetDateTime) -> String {
    let utc = at.to_offset(UtcOffset::UTC);
    utc.format(format_description!(
        "[year]-[month]-[day] [hour]:[minute]:[second]Z"
    ))
    .unwrap_or_else(|_| utc.to_string())
}

/// `7d`, `1d12h`, `90s`, `0s`.
pub fn duration(d: Duration) -> String {
    let mut rest = d.whole_seconds();
    let mut text = String::new();
    if rest < 0 {
        text.push('-');
        rest = -rest;
    }
    for (unit, seconds) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if rest >= seconds {
            text.push_str(&format!("{}{unit}", rest / seconds));
            rest %= seconds;
        }
    }
    if text.is_empty() || text == "-" {
        "0s".to_owned()
    } else {
        text
    }
}

/// Whether a person reading `c` in a terminal could be misled by it: what
/// [`assent_domain::misleads`] says for every surface (controls, bidi controls,
/// invisible format characters), except that newlines and tabs are the terminal's
/// layout, not tricks.
fn misleads(c: char) -> bool {
    c != '\n' && c != '\t' && assent_domain::misleads(c)
}

/// `text` with every character that [`misleads`] a reader written as a visible
/// `\uXXXX` escape. In JSON strings that escape means the same character, so output
/// for machines stays valid and unchanged in meaning.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(misleads) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if misleads(c) {
            // UTF-16 units, as JSON spells a character beyond the first plane.
            for unit in c.encode_utf16(&mut [0; 2]) {
                shown.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// `text` on one line of a person's terminal, at most about `max` characters of it:
/// a longer text keeps its head and its tail around a marker saying how many characters
/// were left out ([`head_and_tail`]), because what is appended to a value, or where a
/// path ends, is what a reviewer must not miss. What is kept is made [`visible`]
/// before it is put on one line, so controls read as the same escapes as everywhere
/// else on the terminal (and a newline as `⏎`).
pub(crate) fn cut(text: &str, max: usize) -> String {
    shown(text, max).0
}

/// [`cut`], and whether anything was left out (the caller then says where to see it).
fn shown(text: &str, max: usize) -> (String, bool) {
    let was_cut = text.chars().count() > max;
    let kept = head_and_tail(text, max);
    (one_line(&visible(&kept)).into_owned(), was_cut)
}

/// A JSON value for a person: strings bare, `null` as `none`, the rest as JSON.
fn value(v: &Value) -> String {
    match v {
        Value::Null => "none".to_owned(),
        Value::String(s) => s.clone(),
        other => canonical_json(other),
    }
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            text.push_str(cell);
            if i < last {
                text.push_str(&" ".repeat(width - cell.chars().count() + 2));
            }
        }
        text.trim_end().to_owned()
    };
    let mut lines = vec![line(header.to_vec())];
    lines.extend(
        rows.iter()
            .map(|row| line(row.iter().map(String::as_str).collect())),
    );
    lines.join("\n")
}

/// Indents every line of `text` by `prefix`.
pub fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{prefix}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// After `agent create`. A category is a task category of the journal, except
/// `mcp`, the target kind of the MCP gateway's calls: that one is no task category.
pub fn agent(id: &str, categories: &[&str], created: bool) -> String {
    let verb = if created { "Created" } else { "Updated" };
    let (servers, rest): (Vec<&str>, Vec<&str>) = categories
        .iter()
        .partition(|c| **c == assent_mcp::TARGET_KIND);
    // A coding agent's workspaces (`assent hook`'s default category) hold files and
    // commands, not tasks (issue 53, point 18).
    let (code, tasks): (Vec<&str>, Vec<&str>) = rest
        .iter()
        .partition(|c| **c == assent_hook::DEFAULT_CATEGORY);
    let mut may = Vec::new();
    if !tasks.is_empty() || (servers.is_empty() && code.is_empty()) {
        may.push(format!("change tasks in {}", tasks.join(", ")));
    }
    if !code.is_empty() {
        may.push(format!(
            "run commands and change files through `assent hook` in workspaces of category {}",
            assent_hook::DEFAULT_CATEGORY
        ));
    }
    if !servers.is_empty() {
        may.push("call the tools of the MCP servers it meets through `assent mcp`".to_owned());
    }
    format!("{verb} agent {id}: it may {}", may.join(", and "))
}

/// Whether an agent allowed `categories` is a coding agent (only `assent hook`'s
/// workspaces and `assent mcp`'s servers): its settings apply from its next call, not
/// its next wake.
pub fn coding_agent(categories: &[String]) -> bool {
    !categories.is_empty()
        && categories.iter().all(|category| {
            category == assent_hook::DEFAULT_CATEGORY || category == assent_mcp::TARGET_KIND
        })
}

/// When a changed setting of an agent allowed `categories` takes effect.
pub fn takes_effect(categories: &[String]) -> &'static str {
    if coding_agent(categories) {
        "from its next call on"
    } else {
        "from its next wake on"
    }
}

/// A task, field by field (unset fields are left out).
pub fn task(task: &TaskSnapshot) -> String {
    let mut rows: Vec<(&str, String)> =
        vec![("id", task.id.clone()), ("status", task.status.clone())];
    let optional = [
        ("priority", task.priority.clone()),
        (
            "estimate",
            task.estimate_minutes.map(|m| format!("{m} min")),
        ),
        ("due", task.due_date.map(|d| d.to_string())),
        ("category", task.category.clone()),
        ("language", task.language.clone()),
    ];
    rows.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
    if !task.labels.is_empty() {
        rows.push(("labels", task.labels.join(", ")));
    }
    let mut text = format!("Task \"{}\"\n", task.title);
    for (key, val) in rows {
        text.push_str(&format!("  {key:<10} {val}\n"));
    }
    for (i, item) in task.checklist.iter().enumerate() {
        let key = if i == 0 { "checklist" } else { "" };
        let mark = if item.is_checked { "x" } else { " " };
        text.push_str(&format!("  {key:<10} [{mark}] {}\n", item.title));
    }
    text
}

/// The replies of a wake, call by call, and what was queued.
pub fn wake(request: &WakeRequest, outcome: &WakeOutcome) -> String {
    let mut text = format!(
        "Wake of agent {} on {} (run {}): {} call(s)\n",
        request.agent_id,
        request.target,
        request.run_key,
        request.calls.len()
    );
    text.push_str(&replies(request, outcome));
    text.push('\n');
    match &outcome.change_set {
        Some(set) => text.push_str(&format!(
            "Queued for review: change set {} with {} item(s); see `assent pending`\n",
            set.id,
            set.items.len()
        )),
        None => text.push_str("Nothing was queued for review\n"),
    }
    text
}

/// One block per call: its id and tool, then the reply the model gets.
pub fn replies(request: &WakeRequest, outcome: &WakeOutcome) -> String {
    let mut text = String::new();
    for response in &outcome.responses {
        let tool = request
            .calls
            .iter()
            .find(|c| c.id == response.tool_call_id)
            .map_or("?", |c| c.name.as_str());
        text.push_str(&format!("  {}  {tool}\n", response.tool_call_id));
        text.push_str(&indent(&response.content, "      → "));
        text.push('\n');
    }
    text
}

/// How much of an item's summary a list line shows before cutting it.
const SUMMARY_CHARS: usize = 100;
/// How much of an argument's value (or an item's earlier value) a list line shows.
const VALUE_CHARS: usize = 100;
/// How much of an argument's name a list line shows.
const KEY_CHARS: usize = 40;

/// One item of a list: its line (status, summary, the value it replaces), then every
/// argument on a line of its own, since the summary is the host's wording and may
/// leave an argument out or cut it. A cut value keeps both ends, and the item then
/// says how to see it whole.
fn item_lines(
    set: Uuid,
    index: usize,
    item: &ChangeItem,
    revision: Option<&Revision>,
    decisions: &[ChangeDecision],
) -> String {
    // The tool's name, always: a host's summary may start with a title of its choosing.
    let named = named_summary(&item.tool_name, &item.human_summary);
    let (summary, mut was_cut) = shown(&named, SUMMARY_CHARS);
    let before = match &item.before {
        Some(before) => {
            let (text, cut) = shown(&value(before), VALUE_CHARS);
            was_cut |= cut;
            format!("  (now: {text})")
        }
        None => String::new(),
    };
    let edit = edited_by_decision(item, index, decisions).or_else(|| edited(item, revision));
    // The summary is the host's wording of the agent's proposal, not of an edit.
    let proposed = if edit.is_some() { " (as proposed)" } else { "" };
    let mut text = format!(
        "  [{index}] {:<10} {summary}{proposed}{before}",
        item.status.as_str()
    );
    if item.revision > 0 {
        text.push_str(&format!("\n        revision {}", item.revision));
    }
    if let Some((_, by)) = &edit {
        text.push_str(&format!(
            "\n        edited by {}: these arguments run, not the agent's (assent show {set} {index})",
            one_line(&visible(by))
        ));
    }
    let runs = edit.map_or(&item.args, |(args, _)| args);
    let args: Vec<(String, &Value)> = match runs {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Null => Vec::new(),
        other => vec![("args".to_owned(), other)],
    };
    for (key, arg) in args {
        let (key, key_cut) = shown(&key, KEY_CHARS);
        let (arg, arg_cut) = shown(&value(arg), VALUE_CHARS);
        was_cut |= key_cut || arg_cut;
        text.push_str(&format!("\n        {key}: {arg}"));
    }
    if was_cut {
        text.push_str(&format!(
            "\n        (cut to fit; every argument whole: assent show {set} {index})"
        ));
    }
    text
}

/// The arguments item `item` runs with when a person's edit under a quorum replaced the
/// agent's (its current `revision`'s), and who edited.
fn edited<'r>(item: &ChangeItem, revision: Option<&'r Revision>) -> Option<(&'r Value, String)> {
    let revision = revision?;
    let args = revision.args.as_ref().filter(|args| **args != item.args)?;
    let by = revision
        .edited_by
        .clone()
        .unwrap_or_else(|| "a person".to_owned());
    Some((args, by))
}

/// The arguments item `index` (`item`) ran with when a person confirmed it with edited
/// arguments (its confirmation among `decisions`, the set's), and who edited: any item,
/// with or without a quorum.
fn edited_by_decision<'d>(
    item: &ChangeItem,
    index: usize,
    decisions: &'d [ChangeDecision],
) -> Option<(&'d Value, String)> {
    let decision = decisions
        .iter()
        .rev()
        .find(|d| d.item_index == index && d.verdict == Verdict::Confirmed)?;
    let args = decision
        .edited_args
        .as_ref()
        .filter(|args| **args != item.args)?;
    let by = decision
        .decided_by
        .clone()
        .unwrap_or_else(|| "a person".to_owned());
    Some((args, by))
}

/// A change set: a header line, then each item with its arguments.
pub fn change_set(set: &ChangeSet) -> String {
    change_set_shown(set, None, &[])
}

/// [`change_set`], each item showing the arguments it runs with (`quorum`'s current
/// revision's, or its confirmation's among `decisions`, where a person edited them).
fn change_set_shown(
    set: &ChangeSet,
    quorum: Option<&Quorum>,
    decisions: &[ChangeDecision],
) -> String {
    let mut text = set_header(set);
    for (index, item) in set.items.iter().enumerate() {
        let revision = quorum
            .and_then(|q| quorum_of_item(q, index))
            .map(|(_, revision)| revision);
        text.push_str(&item_lines(set.id, index, item, revision, decisions));
        text.push('\n');
    }
    text
}

fn set_header(set: &ChangeSet) -> String {
    format!(
        "Change set {} ({})\n  agent {}, {}, created {}\n",
        set.id,
        set.status,
        set.agent_id,
        one_line(&visible(&set.target().to_string())),
        time(set.created_at)
    )
}

/// The sets of `assent pending`, each confirmed item of an external tool followed by
/// how its run stands.
pub fn pending(records: &[SetRecord]) -> String {
    if records.is_empty() {
        return "No change sets wait for review".to_owned();
    }
    records
        .iter()
        .map(|record| {
            let (set, quorum) = (&record.set, &record.quorum);
            let mut text = change_set_shown(set, Some(quorum), &record.decisions);
            for job in &record.jobs {
                text.push_str(&execution(job));
                text.push('\n');
            }
            for (index, needed, revision) in &quorum.items {
                if set
                    .items
                    .get(*index)
                    .is_some_and(|item| item.status.is_open())
                {
                    text.push_str(&approvals_line(*index, *needed, revision));
                    text.push('\n');
                }
            }
            text
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `assent show`: the set's header, then each item (only item `only` when given) with
/// everything a person decides on, nothing cut: its summary, every argument whole,
/// the value it replaces, why it was rejected, how its run stands. Agent text keeps
/// its lines, each behind a `│` gutter, so no value can print a line that passes for
/// the command's own.
pub fn show(
    set: &ChangeSet,
    only: Option<usize>,
    jobs: &[Job],
    decisions: &[ChangeDecision],
    tools: &[ServedTool],
    quorum: &Quorum,
    reported: &[assent_tools::AuditRecord],
) -> String {
    let mut text = set_header(set);
    for (index, item) in set.items.iter().enumerate() {
        if only.is_some_and(|only| only != index) {
            continue;
        }
        text.push_str(&format!(
            "\n  [{index}] {}  {}\n",
            item.status.as_str(),
            one_line(&visible(&item.tool_name))
        ));
        text.push_str(&format!(
            "    summary  {}\n",
            one_line(&visible(&item.human_summary))
        ));
        if let Some(detail) = &item.stale_detail {
            text.push_str(&format!("    stale    {}\n", one_line(&visible(detail))));
        }
        let quorum_item = quorum_of_item(quorum, index);
        let revision = quorum_item.map(|(_, revision)| revision);
        if let Some((needed, revision)) = quorum_item {
            text.push_str(&format!(
                "    approvals {} of {needed}{}\n",
                revision.people(),
                approved_by(revision)
            ));
        }
        if item.revision > 0 {
            text.push_str(&format!(
                "    revision {} (confirm with --revision {})\n",
                item.revision, item.revision
            ));
        }
        let edit = edited_by_decision(item, index, decisions).or_else(|| edited(item, revision));
        if let Some((_, by)) = &edit {
            text.push_str(&format!(
                "    edited   by {}: the args below run, not the agent's\n",
                one_line(&visible(by))
            ));
        }
        if let Some(tool) = tools.get(index) {
            text.push_str(&tool.line());
            if let (Some(_), ServedTool::Stored(stored)) = (only, tool) {
                text.push_str(&whole("    schema", &stored.input_schema));
            }
        }
        // The last word on an item wins, as on the page.
        let last = decisions.iter().rev().find(|d| d.item_index == index);
        if let Some(reason) = last
            .filter(|d| d.verdict == Verdict::Rejected)
            .and_then(|d| d.reason.as_deref())
        {
            text.push_str(&format!("    reason   {}\n", one_line(&visible(reason))));
        }
        if let Some(job) = jobs.iter().find(|j| j.item_index == index) {
            let run = run_of(job, reported);
            text.push_str(&format!("    run      {}\n", one_line(&visible(&run))));
        }
        if edit.is_some() {
            text.push_str(&whole("    proposed", &item.args));
        }
        match edit.map_or(&item.args, |(args, _)| args) {
            Value::Object(map) if map.is_empty() => text.push_str("    args     none\n"),
            Value::Object(map) => {
                text.push_str(&format!("    args     {}\n", map.len()));
                for (key, arg) in map {
                    text.push_str(&whole(&format!("      {}", one_line(&visible(key))), arg));
                }
            }
            other => text.push_str(&whole("    args", other)),
        }
        if let Some(before) = &item.before {
            let label = format!("    {}", before_label(&set.target_kind));
            text.push_str(&whole(&label, before));
        }
    }
    text
}

/// What an item's `before` is called: for a coding agent's file call its workspace
/// host stores the diff the call makes (issue 53, point 18), for any other item the
/// value the call replaces.
fn before_label(target_kind: &str) -> &'static str {
    if target_kind == assent_confirm::records::AGENT_RUNS_KIND {
        "diff"
    } else {
        "before"
    }
}

/// How job `job`'s run stands: for a coding agent's call, in the words of a call, with
/// what the agent reported it ran (the last of `reported`, its hook's after events);
/// for any other, the job's own status ([`run`]).
fn run_of(job: &Job, reported: &[assent_tools::AuditRecord]) -> String {
    let reported = reported.last().and_then(|record| record.detail.as_deref());
    job.agent_outcome(reported).unwrap_or_else(|| run(job))
}

/// What `assent review` knows about the item it shows, besides the set itself.
pub struct ReviewContext<'a> {
    /// The item's place among those waiting for this reviewer: `(n, of)`.
    pub place: (usize, usize),
    /// The set's quorum state.
    pub quorum: &'a Quorum,
    /// The hold window a confirmation starts, when the agent's settings hold the tool.
    pub hold: Option<Duration>,
    /// The reviewer's clock.
    pub now: OffsetDateTime,
    /// Until when the agent's request is held for an answer (the gateway's `--wait`),
    /// when its door said so: shown, never decided on.
    pub waits_until: Option<OffsetDateTime>,
}

/// `the agent waits 42s more` or `the agent stopped waiting`: how long a caller held
/// by its door (the gateway's `--wait`) still waits at `now`.
pub fn waits(until: OffsetDateTime, now: OffsetDateTime) -> String {
    if until > now {
        format!("the agent waits {} more", duration(until - now))
    } else {
        "the agent stopped waiting (it was told the call is queued)".to_owned()
    }
}

/// One waiting item as `assent review` shows it: who asks and for how long already,
/// the tool's name (never only a host's title), `body` (what runs, drawn by
/// `review_card::body`: every argument whole, a file's change as a diff), approvals
/// so far, a hold, and the keys.
pub fn review_card(
    set: &ChangeSet,
    index: usize,
    context: &ReviewContext<'_>,
    body: &str,
) -> String {
    let item = &set.items[index];
    let (n, of) = context.place;
    let waited = duration(context.now - set.created_at);
    let mut text = format!(
        "\n── waiting {n} of {of} ── agent {}, {}, waiting {waited}\n",
        one_line(&visible(&set.agent_id)),
        one_line(&visible(&set.target().to_string())),
    );
    if let Some(until) = context.waits_until {
        text.push_str(&format!("  {}\n", waits(until, context.now)));
    }
    text.push_str(&format!(
        "  {}   (set {}, item {index}, revision {})\n",
        one_line(&visible(&item.tool_name)),
        &set.id.simple().to_string()[..8],
        item.revision
    ));
    let (summary, was_cut) = shown(&item.human_summary, SUMMARY_CHARS);
    text.push_str(&format!("  summary  {summary}\n"));
    if let Some(detail) = &item.stale_detail {
        text.push_str(&format!("  stale    {}\n", one_line(&visible(detail))));
    }
    let quorum = quorum_of_item(context.quorum, index);
    let edit = edited(item, quorum.map(|(_, revision)| revision));
    if let Some((_, by)) = &edit {
        text.push_str(&format!(
            "  edited   by {}: these arguments run, not the agent's\n",
            one_line(&visible(by))
        ));
    }
    text.push_str(body);
    if let Some((needed, revision)) = quorum {
        text.push_str(&format!(
            "  approvals {} of {needed}{}\n",
            revision.people(),
            approved_by(revision)
        ));
    }
    if let Some(hold) = context.hold {
        text.push_str(&format!(
            "  hold     runs {} after it is confirmed (cancel meanwhile with `assent jobs cancel`)\n",
            duration(hold)
        ));
    }
    if was_cut {
        text.push_str(&format!(
            "  (summary cut to fit; the arguments above are what runs: assent show {} {index})\n",
            set.id
        ));
    }
    text.push_str(REVIEW_KEYS);
    text
}

/// The keys `assent review` answers, under every item it shows.
pub const REVIEW_KEYS: &str = "  [y] confirm  [S] for this session  [n] reject  [e] edit  [v] view whole  [d] defer  [s] skip  [a] confirm the rest of the set  [?] help  [q] quit\n";

/// What the database knows of an item's tool, for `assent show`.
#[derive(Debug)]
pub enum ServedTool {
    /// The item names no host (written before hosts were recorded, or synced).
    Unrecorded,
    /// Its host stored the tool when its engine opened.
    Stored(Box<HostTool>),
    /// Its host registered, but not this tool.
    Unlisted(String),
    /// Its host never opened an engine on this database.
    NeverRegistered(String),
}

impl ServedTool {
    /// `    host     invoicing: Refund an invoice.`, or what is missing; nothing for
    /// an item that names no host.
    fn line(&self) -> String {
        let said = match self {
            Self::Unrecorded => return String::new(),
            Self::Stored(tool) => {
                let description = tool.definition["description"].as_str().unwrap_or_default();
                format!("{}: {}", tool.host, description)
            }
            Self::Unlisted(host) => format!("{host} (it never listed this tool)"),
            Self::NeverRegistered(host) => {
                format!("{host} (never registered in this database: its schema is unknown here)")
            }
        };
        format!("    host     {}\n", one_line(&visible(&said)))
    }
}

/// `label (string, N chars)` or `label (JSON)`, then the value whole, one `│` line per
/// line of it: a string as written (a final newline shows as a last empty line), any
/// other value as indented JSON.
fn whole(label: &str, value: &Value) -> String {
    let (kind, body) = match value {
        Value::String(s) => (format!("string, {} chars", s.chars().count()), s.clone()),
        other => (
            "JSON".to_owned(),
            serde_json::to_string_pretty(other).unwrap_or_else(|_| canonical_json(other)),
        ),
    };
    let mut text = format!("{label} ({kind})\n");
    let gutter = " ".repeat(label.len() - label.trim_start().len() + 2);
    for line in body.split('\n') {
        text.push_str(&format!("{gutter}│ {}\n", one_line(&visible(line))));
    }
    text
}

/// Item `index`'s approvals needed and current revision in `quorum`, when it is there.
fn quorum_of_item(quorum: &Quorum, index: usize) -> Option<(u32, &Revision)> {
    quorum
        .items
        .iter()
        .find(|(i, _, _)| *i == index)
        .map(|(_, needed, revision)| (*needed, revision))
}

/// ` (by alice, bob)`, who approved `revision`, each name as text; empty before anyone.
fn approved_by(revision: &Revision) -> String {
    let by: Vec<&str> = revision.approvals.iter().map(|a| a.by.as_str()).collect();
    if by.is_empty() {
        return String::new();
    }
    format!(" (by {})", one_line(&visible(&by.join(", "))))
}

/// `  [0] 1 of 2 approvals (by alice)`: an open item's quorum.
fn approvals_line(index: usize, needed: u32, revision: &Revision) -> String {
    format!(
        "  [{index}] {} of {needed} approvals{}",
        revision.people(),
        approved_by(revision)
    )
}

/// How the run of a confirmed external item stands: `  [1] run: in doubt (attempt 2,
/// job …): the executor stopped ...`.
pub fn execution(job: &Job) -> String {
    format!("  [{}] run: {}", job.item_index, run(job))
}

/// A job's status for people: `in doubt`, or `scheduled until …` while it waits out a
/// hold window.
pub fn job_status(job: &Job) -> String {
    if job.scheduled() {
        format!("{} until {}", job.status_name(), time(job.due_at))
    } else {
        job.status.label().to_owned()
    }
}

/// `in doubt (attempt 2, job …): the executor stopped ...`, or for a held confirmation
/// `scheduled until … (job …; cancel: assent jobs cancel …)` (for a copy of another
/// device's, where to cancel it).
fn run(job: &Job) -> String {
    if let (true, Some(owner)) = (job.scheduled(), &job.owner_device) {
        // A copy synced from the device that confirmed it: cancelled (and run) there.
        return format!(
            "{} (job {}; confirmed on device {owner}: cancel it there)",
            job_status(job),
            job.id
        );
    }
    if job.scheduled() {
        return format!(
            "{} (job {}; cancel: assent jobs cancel {})",
            job_status(job),
            job.id,
            job.id
        );
    }
    let detail = match (job.status, &job.last_error, &job.result) {
        (JobStatus::Applied, _, Some(result)) => format!(": {result}"),
        (JobStatus::Applied, _, None) => String::new(),
        (_, Some(error), _) => format!(": {error}"),
        _ => String::new(),
    };
    format!(
        "{} (attempt {}, job {}){detail}",
        job.status.label(),
        job.attempts,
        job.id
    )
}

fn mark(verdict: Verdict, edited: bool) -> &'static str {
    match verdict {
        Verdict::Confirmed if edited => "✎",
        Verdict::Confirmed => "✓",
        Verdict::Rejected => "✗",
        Verdict::Deferred => "⏸",
        Verdict::Retracted => "↺",
        // A verdict this build has no mark for: never shown as confirmed.
        _ => "?",
    }
}

/// A confirmation: what was decided and what the handler said.
pub fn confirmed(index: usize, outcome: &ConfirmOutcome) -> String {
    let short = matches!(
        outcome.execution,
        ExecutionOutcome::AwaitingApprovals { .. }
    );
    confirmed_line(index, &outcome.decision, short, &outcome.message())
}

/// [`confirmed`] from its parts (a remote server's answer gives no
/// [`ConfirmOutcome`]): `short` when the approval left the item short of its quorum.
pub fn confirmed_line(index: usize, d: &ChangeDecision, short: bool, message: &str) -> String {
    let verb = if short { "approved" } else { "confirmed" };
    let how = match &d.edited_args {
        Some(args) => format!("{verb} with edits {}", canonical_json(args)),
        None => verb.to_owned(),
    };
    // One line per item, whatever the agent's summary or the handler's message holds:
    // a newline in either could print a line that reads as another result.
    format!(
        "{} [{index}] {} — {how}: {}",
        mark(d.verdict, d.edited_args.is_some()),
        one_line(&visible(&d.human_summary)),
        one_line(&visible(message))
    )
}

/// A rejection, deferral or retraction.
pub fn decision(d: &ChangeDecision) -> String {
    let reason = d
        .reason
        .as_deref()
        .map(|r| format!(" (reason: \"{}\")", one_line(&visible(r))))
        .unwrap_or_default();
    format!(
        "{} [{}] {} — {}{reason}",
        mark(d.verdict, d.edited_args.is_some()),
        d.item_index,
        one_line(&visible(&d.human_summary)),
        d.verdict
    )
}

/// Several decisions (a dismissal).
pub fn decisions(decisions: &[ChangeDecision]) -> String {
    decisions
        .iter()
        .map(decision)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The results of `confirm --all`, one line per item.
pub fn confirm_all(result: &ConfirmAllResult) -> String {
    result
        .items
        .iter()
        .map(|item| match &item.result {
            ItemResult::Confirmed(outcome) => confirmed(item.index, outcome),
            ItemResult::Skipped(why) => {
                format!(
                    "· [{}] {} — skipped: {why}",
                    item.index,
                    one_line(&visible(&item.summary))
                )
            }
            ItemResult::Failed(error) => {
                format!(
                    "! [{}] {} — failed: {error}",
                    item.index,
                    one_line(&visible(&item.summary))
                )
            }
            // An outcome this build does not know: never shown as confirmed.
            other => format!(
                "! [{}] {} — {other:?}",
                item.index,
                one_line(&visible(&item.summary))
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// After `expire`.
pub fn expired(ids: &[Uuid], ttl: Duration) -> String {
    if ids.is_empty() {
        return format!("No open change sets older than {}", duration(ttl));
    }
    let mut text = format!(
        "Expired {} change set(s) older than {}:",
        ids.len(),
        duration(ttl)
    );
    for id in ids {
        text.push_str(&format!("\n  {id}"));
    }
    text
}

/// The history section, or a line saying there is none.
pub fn history(section: Option<&str>, agent: &str) -> String {
    match section {
        Some(section) => section.to_owned(),
        None => format!(
            "No decisions about agent {agent}'s proposals yet: its next wake gets no history section"
        ),
    }
}

/// The audit trail as a table.
pub fn audit(records: &[AuditRecord]) -> String {
    if records.is_empty() {
        return "The audit trail is empty".to_owned();
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                time(r.created_at),
                r.kind.as_str().to_owned(),
                r.agent_id.clone(),
                cut(
                    &format!("{} {}", r.tool_name, canonical_json(&r.args)),
                    MAX_CELL_CHARS,
                ),
                match r.success {
                    Some(true) => "ok".to_owned(),
                    Some(false) => "failed".to_owned(),
                    None => String::new(),
                },
                cut(&audit_detail(r), MAX_CELL_CHARS),
            ]
        })
        .collect();
    table(
        &["TIME", "KIND", "AGENT", "CALL", "RESULT", "DETAIL"],
        &rows,
    )
}

/// An audit record's detail; a call refused again names the rejection first
/// (`refused again: rejection 5e72c9a1: …`).
fn audit_detail(record: &AuditRecord) -> String {
    let detail = record.detail.as_deref().unwrap_or_default();
    match assent_confirm::rejections::rejected_before(record) {
        Some(id) => format!(
            "refused again: rejection {}: {detail}",
            &id.simple().to_string()[..8]
        ),
        None => detail.to_owned(),
    }
}

/// The undelivered outbox messages as a table.
pub fn outbox(messages: &[OutboxMessage]) -> String {
    if messages.is_empty() {
        return "The outbox is empty: nothing waits to sync".to_owned();
    }
    let rows: Vec<Vec<String>> = messages
        .iter()
        .map(|m| {
            vec![
                m.id.to_string(),
                m.status.clone(),
                m.entity_type.clone(),
                m.entity_id.clone(),
                m.attempts.to_string(),
                time(m.updated_at),
                cut(m.last_error.as_deref().unwrap_or_default(), MAX_CELL_CHARS),
            ]
        })
        .collect();
    table(
        &[
            "#",
            "STATUS",
            "ENTITY",
            "ID",
            "ATTEMPTS",
            "UPDATED",
            "LAST ERROR",
        ],
        &rows,
    )
}

/// Standing grants as a table.
pub fn grants(grants: &[Grant]) -> String {
    if grants.is_empty() {
        return "No grants: every sub-agent call that needs a person is asked".to_owned();
    }
    let rows: Vec<Vec<String>> = grants
        .iter()
        .map(|g| {
            vec![
                g.id.to_string(),
                g.agent_path.clone(),
                g.tool_name.clone(),
                grant_covers(g),
                time(g.created_at),
                g.revoked_at.map(time).unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &["ID", "AGENT", "TOOL", "ARGS PATTERN", "GIVEN", "REVOKED"],
        &rows,
    )
}

/// What a grant covers, in a cell: its arguments pattern, and a session grant's
/// session.
fn grant_covers(grant: &Grant) -> String {
    let covers = match (&grant.call_pattern, &grant.args_pattern) {
        (Some(pattern), _) => visible(pattern).into_owned(),
        (None, Some(args)) => canonical_json(args),
        (None, None) => "(any)".to_owned(),
    };
    let covers = match &grant.session_id {
        Some(session) => format!("{covers} in session {}", visible(session)),
        None => covers,
    };
    cut(&covers, MAX_CELL_CHARS)
}

/// One line about a session grant just given.
pub fn session_granted(grant: &Grant) -> String {
    format!(
        "Allowed for the rest of session {} without asking: {} {} (grant {}; `assent grants revoke {}` takes it back)",
        one_line(&visible(grant.session_id.as_deref().unwrap_or_default())),
        grant.tool_name,
        grant.call_pattern.as_deref().map_or_else(
            || format!(
                "with exactly {}",
                one_line(&canonical_json(
                    grant.args_pattern.as_ref().unwrap_or(&Value::Null)
                ))
            ),
            |pattern| format!("as {}", one_line(&visible(pattern))),
        ),
        grant.id,
        grant.id
    )
}

/// One line about a revoked grant.
pub fn grant_revoked(grant: &Grant) -> String {
    format!(
        "Revoked grant {}: {} asks again before running {}",
        grant.id, grant.agent_path, grant.tool_name
    )
}

/// What `assent sync export` wrote.
pub fn exported(batch: &assent_sync::SyncBatch, file: &std::path::Path) -> String {
    let state = &batch.state;
    format!(
        "Exported batch {} of host {} to {}: {} change set(s), {} decision(s), {} audit record(s), {} task(s)",
        batch.batch_id,
        batch.from_host,
        file.display(),
        state.change_sets.len(),
        state.decisions.len(),
        state.audit_records.len(),
        state.entities.len()
    )
}

/// What `assent sync import` merged.
pub fn imported(report: &ImportReport) -> String {
    let mut text = merged_line(report);
    if !report.conflicts.is_empty() {
        text.push_str(CONFLICTS_HINT);
    }
    text
}

const CONFLICTS_HINT: &str = "\nSee `assent conflicts`.";

/// One line on what merging one batch did.
fn merged_line(report: &ImportReport) -> String {
    if report.replayed {
        return format!(
            "Batch {} of host {} was merged before: nothing changed",
            report.batch_id, report.from_host
        );
    }
    format!(
        "Merged batch {} of host {}: {} new change set(s), {} updated, {} decision(s), {} audit record(s), {} task(s) written, {} conflict(s)",
        report.batch_id,
        report.from_host,
        report.change_sets_inserted,
        report.change_sets_updated,
        report.decisions_inserted,
        report.audit_records_inserted,
        report.entities_written,
        report.conflicts.len()
    )
}

/// What `assent sync --peer` merged on both sides.
pub fn synced(
    peer: &str,
    peer_host: &str,
    peer_import: &ImportReport,
    local_import: &ImportReport,
) -> String {
    let mut text = format!(
        "Synced with host {peer_host} at {peer}\nThe peer: {}\nThis device: {}",
        merged_line(peer_import),
        merged_line(local_import)
    );
    if !(peer_import.conflicts.is_empty() && local_import.conflicts.is_empty()) {
        text.push_str(CONFLICTS_HINT);
    }
    text
}

/// The recorded conflicts as a table.
pub fn conflicts(records: &[ConflictRecord]) -> String {
    if records.is_empty() {
        return "No conflicts: no two devices decided the same item differently".to_owned();
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let c = &r.conflict;
            let loser = &c.loser.decision;
            vec![
                c.change_set_id.to_string(),
                c.item_index.to_string(),
                format!("{} on {}", c.winner_verdict, c.winner_host),
                format!(
                    "{} on {} at {}",
                    loser.verdict,
                    c.loser.origin_host,
                    time(loser.created_at)
                ),
                if r.loser_change_stays {
                    "its change stays applied: undo it by hand".to_owned()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(&["CHANGE SET", "ITEM", "IN FORCE", "LOST", "NOTE"], &rows)
}

/// The devices this one has merged batches from, as a table.
pub fn peers(peers: &[Peer]) -> String {
    if peers.is_empty() {
        return "No peers yet: import another device's batch with `assent sync import`".to_owned();
    }
    let rows: Vec<Vec<String>> = peers
        .iter()
        .map(|p| {
            vec![
                p.host_id.clone(),
                p.batches_merged.to_string(),
                p.last_batch_id.to_string(),
                time(p.last_merged_at),
            ]
        })
        .collect();
    table(&["HOST", "BATCHES", "LAST BATCH", "MERGED"], &rows)
}

/// `assent audit verify`: one line when the proof holds, else every violation.
pub fn proof(report: &assent_confirm::history::Report) -> String {
    let unchecked = proof_unchecked(report);
    let scope = proof_scope(report);
    if report.verified() {
        return format!(
            "verified: {} entries on the chain of device {}, {} effect(s) checked, head {}\n  {scope}{unchecked}",
            report.entries, report.device_id, report.effects_checked, report.head
        );
    }
    let mut out = format!(
        "NOT verified: {} violation(s) ({} entries, {} effect(s) checked)\n  {scope}\n",
        report.violations.len(),
        report.entries,
        report.effects_checked
    );
    for violation in &report.violations {
        out.push_str(&format!(
            "  {} [{}] expected {}\n",
            visible(&violation.entry),
            violation.rule.as_str(),
            visible(&violation.expected)
        ));
    }
    if !unchecked.is_empty() {
        out.push_str(unchecked.trim_start());
        out.push('\n');
    }
    out
}

/// Which entries the proof checked: those after the head the last clean verify
/// stored, or the whole chain and why.
fn proof_scope(report: &assent_confirm::history::Report) -> String {
    match (&report.started_after, &report.full_because) {
        (Some(head), _) => format!(
            "verified {} new entries since head {} (entry {}, verified {}); only --full finds a change before it",
            report.checked_entries,
            head.hash,
            head.seq,
            head.verified_at.map(time).unwrap_or_default()
        ),
        (None, Some(because)) => format!(
            "verified fully: all {} entries ({})",
            report.checked_entries,
            visible(because)
        ),
        (None, None) => format!("verified fully: all {} entries", report.checked_entries),
    }
}

/// What the proof could not tie to a person here, one line each after the verdict:
/// effects answered in the agent's client, effects imported from other devices by
/// origin device (`--strict` fails both).
fn proof_unchecked(report: &assent_confirm::history::Report) -> String {
    let mut out = String::new();
    if report.client_answered > 0 {
        out.push_str(&format!(
            "\n  {} effect(s) confirmed by an answer in the agent's client, not by a person (--strict fails them)",
            report.client_answered
        ));
    }
    for (device, count) in &report.imported {
        out.push_str(&format!(
            "\n  {count} effect(s) imported from device {}: unchecked here, their consent is on that device's chain (--strict fails them)",
            visible(device)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_is_told_what_it_may_change() {
        assert_eq!(
            agent("a", &["work", "home"], true),
            "Created agent a: it may change tasks in work, home"
        );
        assert_eq!(
            agent("bot", &["mcp"], false),
            "Updated agent bot: it may call the tools of the MCP servers it meets through `assent mcp`"
        );
        assert_eq!(
            agent("both", &["work", "mcp"], true),
            "Created agent both: it may change tasks in work, and call the tools of the MCP servers it meets through `assent mcp`"
        );
    }

    /// Issue 53, point 18: a coding agent was told "it may change tasks in code".
    #[test]
    fn a_coding_agent_is_told_of_commands_and_files_not_tasks() {
        assert_eq!(
            agent("claude", &["code"], true),
            "Created agent claude: it may run commands and change files through `assent hook` in workspaces of category code"
        );
        let code = ["code".to_owned()];
        assert_eq!(takes_effect(&code), "from its next call on");
        assert_eq!(takes_effect(&["work".to_owned()]), "from its next wake on");
        assert_eq!(
            takes_effect(&["code".to_owned(), "work".to_owned()]),
            "from its next wake on"
        );
    }

    #[test]
    fn durations_read_like_the_flag() {
        assert_eq!(duration(Duration::days(7)), "7d");
        assert_eq!(duration(Duration::hours(36)), "1d12h");
        assert_eq!(duration(Duration::seconds(90)), "1m30s");
        assert_eq!(duration(Duration::ZERO), "0s");
    }

    #[test]
    fn how_long_the_agent_still_waits_reads_from_the_reviewers_clock() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(
            waits(now + Duration::seconds(42), now),
            "the agent waits 42s more"
        );
        assert!(waits(now, now).starts_with("the agent stopped waiting"));
        assert!(waits(now - Duration::seconds(1), now).starts_with("the agent stopped waiting"));
    }

    #[test]
    fn controls_and_bidi_marks_are_shown_as_escapes() {
        let title = "Fix\u{1b}[2K bug\u{0}\r\u{202e}evil\u{2069}\u{9b}";
        assert_eq!(
            visible(title),
            "Fix\\u001b[2K bug\\u0000\\u000d\\u202eevil\\u2069\\u009b"
        );
        assert_eq!(
            visible("two\nlines\tand ünïcode"),
            "two\nlines\tand ünïcode"
        );
        // The escapes keep JSON valid and equal in meaning.
        let json = serde_json::json!({"title": "a\u{202e}b\u{1b}"}).to_string();
        let parsed: Value = serde_json::from_str(&visible(&json)).expect("still JSON");
        assert_eq!(parsed["title"], "a\u{202e}b\u{1b}");
    }

    #[test]
    fn invisible_format_characters_are_shown_as_escapes_and_keep_json_valid() {
        let text = "a\u{200b}b\u{feff}c\u{2028}d\u{2029}e\u{2060}f\u{2066}g\u{e0041}h";
        assert_eq!(
            visible(text),
            "a\\u200bb\\ufeffc\\u2028d\\u2029e\\u2060f\\u2066g\\udb40\\udc41h"
        );
        let json = serde_json::json!({"summary": text}).to_string();
        let parsed: Value = serde_json::from_str(&visible(&json)).expect("still JSON");
        assert_eq!(parsed["summary"], text);
    }

    #[test]
    fn tables_align_and_cells_stay_on_one_line() {
        let rows: Vec<Vec<String>> = [["1", "a\nb"], ["22", "c"]]
            .iter()
            .map(|r| r.iter().map(|c| cut(c, 10)).collect())
            .collect();
        assert_eq!(table(&["N", "TEXT"], &rows), "N   TEXT\n1   a⏎b\n22  c");
    }

    #[test]
    fn a_cut_keeps_both_ends_and_says_how_much_it_left_out() {
        let path = format!("/home/u/{}/.ssh/authorized_keys", "d".repeat(200));
        let (text, was_cut) = shown(&path, 60);
        assert!(was_cut);
        assert!(text.starts_with("/home/u/"), "{text}");
        assert!(text.ends_with("/.ssh/authorized_keys"), "{text}");
        assert!(text.contains("chars cut"), "{text}");
        assert_eq!(shown("short", 60), ("short".to_owned(), false));
        // One line, controls escaped as everywhere else on the terminal.
        assert_eq!(cut("a\nb\u{1b}[2K", 60), "a⏎b\\u001b[2K");
    }

    fn set_of(args: Value, summary: &str) -> ChangeSet {
        ChangeSet::new(assent_domain::NewChangeSet {
            id: Uuid::nil(),
            agent_id: "a".to_owned(),
            target: assent_domain::Target::new("files", "laptop"),
            thread_id: "t".to_owned(),
            run_key: "r".to_owned(),
            items: vec![ChangeItem::new("write_file", args, summary)],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set")
    }

    #[test]
    fn a_listed_item_shows_every_argument_and_where_to_see_it_whole() {
        let content = format!("{}\nssh-ed25519 AAAA attacker@evil", "k".repeat(300));
        let set = set_of(
            serde_json::json!({"path": "/tmp/a", "content": content, "mode": 384}),
            "Write File(…)",
        );
        let text = change_set(&set);
        assert!(text.contains("        path: /tmp/a\n"), "{text}");
        assert!(text.contains("        mode: 384\n"), "{text}");
        assert!(text.contains("⏎ssh-ed25519 AAAA attacker@evil\n"), "{text}");
        assert!(
            text.contains(&format!("assent show {} 0", Uuid::nil())),
            "{text}"
        );
        let short = set_of(serde_json::json!({"path": "/tmp/a"}), "Write /tmp/a");
        assert!(
            !change_set(&short).contains("assent show"),
            "nothing was cut"
        );
    }

    #[test]
    fn show_prints_each_argument_whole_behind_a_gutter() {
        let content = format!("{}\nssh-ed25519 AAAA attacker@evil\n", "k".repeat(300));
        let set = set_of(
            serde_json::json!({"content": content, "mode": {"octal": "600"}}),
            "Write File(…)",
        );
        let text = show(&set, Some(0), &[], &[], &[], &Quorum::default(), &[]);
        assert!(
            text.contains("      content (string, 332 chars)\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("        │ {}\n", "k".repeat(300))),
            "{text}"
        );
        assert!(
            text.contains("        │ ssh-ed25519 AAAA attacker@evil\n        │ \n"),
            "the final newline is a last empty line: {text}"
        );
        assert!(text.contains("      mode (JSON)\n"), "{text}");
        assert!(text.contains("        │   \"octal\": \"600\"\n"), "{text}");
        assert!(
            show(&set, Some(1), &[], &[], &[], &Quorum::default(), &[])
                .ends_with("created 1970-01-01 00:00:00Z\n")
        );
    }
}
