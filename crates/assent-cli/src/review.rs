//! `assent review`: a person answers waiting calls in a terminal, one key each, the
//! moment they are queued. It follows the change feed (which every process's writes
//! fill), shows one item at a time, oldest first, and decides through the engine's
//! confirmation service as every other door does, bound to the revision it showed:
//! quorum, hold, stale refresh and policy apply here exactly as on `assent confirm`
//! and the page.
//!
//! Nothing a confirmation runs is hidden (issue 53): the card draws every argument
//! whole and a file's change as a diff ([`crate::review_card`]); when the card had to
//! leave lines out to fit the screen, `v` pages through the whole call and `y` asks
//! for `v` (or a second `y`) first. `e` on a file tool opens the file's text, not a
//! JSON string, and `S` answers "yes, for this session" with a pattern to accept or
//! edit.

use crate::CliError;
use crate::cli::ReviewArgs;
use crate::context::{Ctx, Output};
use crate::render::{self, ReviewContext};
use crate::review_card;
use crate::review_server::ReviewServer;
use crate::terminal::{self, Keys, say};
use assent_confirm::ItemRef;
use assent_confirm::records::{PendingFilter, Quorum};
use assent_confirm::{ConfirmError, ConfirmationService};
use assent_domain::{ChangeItemStatus, ChangeSet, OffsetDateTime, Verdict, one_line};
use console::Key;
use serde_json::Value;
use std::collections::HashSet;
use std::io::IsTerminal;
use std::time::Duration;
use uuid::Uuid;

/// How often the change feed is looked at: a new call shows well within a second.
const FEED_POLL: Duration = Duration::from_millis(100);

/// Feed entries read per look.
const FEED_BATCH: i64 = 1_000;

/// What `?` prints.
const HELP: &str = "Keys:
  y  confirm this item (as shown: if it changed meanwhile, nothing is counted; when
     the card left lines out, y asks for v first, or y again)
  S  confirm it, and run its command (or its file's calls) again unasked for the rest
     of the coding agent's session: a pattern is suggested to accept, edit or clear
  n  reject it (asks for a reason; Enter for none, Escape to go back)
  e  edit it in $VISUAL or $EDITOR, then confirm it: a file tool's text (Write's
     content, Edit's new_string, each of MultiEdit's) as plain text, else the
     arguments as JSON
  E  edit every argument as JSON
  v  view the whole call, every line, through $PAGER or page by page
  d  defer it (it stays open; `assent pending` lists it)
  s  skip it for this session
  a  confirm it and the rest of its change set
  ?  this help
  q  quit (ctrl-c too)";

/// Refuses to start without a terminal on both sides, before anything is opened.
pub fn require_terminal() -> Result<(), CliError> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return Ok(());
    }
    Err(CliError::Usage(
        "assent review answers one key at a time and needs a terminal; from a script or CI use `assent pending` and `assent confirm`/`reject`".to_owned(),
    ))
}

/// `assent review`: runs until the person quits.
pub async fn run(
    ctx: &Ctx,
    args: ReviewArgs,
    fixed_now: Option<OffsetDateTime>,
) -> Result<Output, CliError> {
    let reviewer = crate::cli::reviewer(args.reviewer.as_deref());
    let feed = ctx.engine.feed_position().await?;
    review(Door::Local(ctx), reviewer, feed, args, fixed_now).await
}

/// `assent review --server URL`: the same reviewer over a remote `assent serve`, with
/// a reviewer token; no local database is opened. A bad URL or token is one line
/// before the terminal is touched.
pub async fn run_remote(
    args: ReviewArgs,
    fixed_now: Option<OffsetDateTime>,
) -> Result<Output, CliError> {
    let Some(url) = args.server.as_deref() else {
        return Err(CliError::Usage("review --server needs a URL".to_owned()));
    };
    if args.reviewer.is_some() {
        return Err(CliError::Usage(
            "--as does not apply with --server: the server records who decides from the token (use a reviewer token of your own)".to_owned(),
        ));
    }
    let token = args.token.clone().unwrap_or_default();
    let (mut server, identity) = ReviewServer::connect(url, &token).await?;
    server.follow().await?;
    review(Door::Remote(Box::new(server)), identity, 0, args, fixed_now).await
}

/// Where the reviewer reads and decides.
enum Door<'a> {
    /// This database, through the engine's confirmation service.
    Local(&'a Ctx),
    /// A remote `assent serve`, through its API and its event stream.
    Remote(Box<ReviewServer>),
}

/// The session itself, on either door.
async fn review(
    door: Door<'_>,
    reviewer: String,
    feed: i64,
    args: ReviewArgs,
    fixed_now: Option<OffsetDateTime>,
) -> Result<Output, CliError> {
    let span = tracing::info_span!("review", %reviewer);
    let _entered = span.enter();
    let remote = match &door {
        Door::Local(_) => String::new(),
        Door::Remote(server) => format!(" on {}", server.base()),
    };
    let refused = crate::rejection_commands::RefusedWatch::new(
        fixed_now.unwrap_or_else(OffsetDateTime::now_utc),
        args.agent.as_deref(),
    );
    let mut session = Session {
        door,
        reviewer,
        agent: args.agent,
        notify: !args.no_notify,
        fixed_now,
        skipped: HashSet::new(),
        known: None,
        shown: None,
        unseen: 0,
        warned: false,
        told_wait: None,
        idle_said: false,
        feed,
        refused,
    };
    say(&format!(
        "Reviewing as {}{remote}{}. Waiting calls show here as they are queued; ? for the keys, q to quit.",
        one_line(&render::visible(&session.reviewer)),
        session
            .agent
            .as_deref()
            .map(|agent| format!(", agent {}", one_line(&render::visible(agent))))
            .unwrap_or_default()
    ));
    // Declared before the key reader, so it is dropped after it: whatever ends the
    // session (the person, an error, a panic), the terminal is put back.
    let _restore = terminal::Restore::save();
    let mut keys = Keys::start();
    session.run(&mut keys).await?;
    Ok(Output::text(String::new()))
}

/// An open set as the reviewer reads it.
struct Loaded {
    set: ChangeSet,
    quorum: Quorum,
    /// Items whose confirmation waits out a hold window (decided already).
    held: Vec<usize>,
    /// Until when its agent's request waits for an answer, when its door said so.
    waits_until: Option<OffsetDateTime>,
}

/// The item on the screen: which, and the revision the person was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shown {
    set: Uuid,
    index: usize,
    revision: u32,
}

/// How an item stands now, for "decided elsewhere".
struct ItemNow {
    status: ChangeItemStatus,
    revision: u32,
    decided_by: Option<String>,
    /// Confirmed, waiting out a hold window.
    held: bool,
}

/// What woke the session.
enum Event {
    Key(Key),
    Written(Vec<Uuid>),
}

struct Session<'a> {
    door: Door<'a>,
    reviewer: String,
    agent: Option<String>,
    notify: bool,
    fixed_now: Option<OffsetDateTime>,
    /// Items the person skipped in this session.
    skipped: HashSet<(Uuid, usize)>,
    /// Sets seen waiting so far (`None` before the first look): a set not among them
    /// is new, and raises a notice.
    known: Option<HashSet<Uuid>>,
    shown: Option<Shown>,
    /// Lines of the item on the screen its card left out (0 once `v` showed them).
    unseen: usize,
    /// `y` was pressed once on an item with unseen lines: the next `y` confirms it.
    warned: bool,
    /// How long the agent of the item on the screen waits, as last said.
    told_wait: Option<OffsetDateTime>,
    /// "Nothing waits" was said since the last item.
    idle_said: bool,
    /// The change feed's position read up to (this database's).
    feed: i64,
    /// Calls refused again (a remembered rejection) said so far.
    refused: crate::rejection_commands::RefusedWatch,
}

/// The items waiting for `reviewer`, oldest set first, in item order: pending, not
/// held, not skipped, and not yet approved by them at their current revision (under a
/// quorum the others' approvals are what is missing).
fn waiting(loaded: &[Loaded], reviewer: &str, skipped: &HashSet<(Uuid, usize)>) -> Vec<Shown> {
    let mut items = Vec::new();
    for open in loaded {
        for (index, item) in open.set.items.iter().enumerate() {
            let approved = open
                .quorum
                .items
                .iter()
                .any(|(i, _, revision)| *i == index && revision.approved_by(reviewer));
            if item.status == ChangeItemStatus::Pending
                && !open.held.contains(&index)
                && !skipped.contains(&(open.set.id, index))
                && !approved
            {
                items.push(Shown {
                    set: open.set.id,
                    index,
                    revision: item.revision,
                });
            }
        }
    }
    items
}

/// The arguments item `index` of `open` runs with (a person's edit under a quorum, or
/// the agent's), and whether they are the agent's as proposed.
fn runs_of(open: &Loaded, index: usize) -> (Value, bool) {
    let proposed = &open.set.items[index].args;
    let runs = open
        .quorum
        .items
        .iter()
        .find(|(i, _, _)| *i == index)
        .and_then(|(_, _, revision)| revision.args.clone())
        .unwrap_or_else(|| proposed.clone());
    let as_proposed = runs == *proposed;
    (runs, as_proposed)
}

/// The body of item `index`'s card, whole.
fn whole_body(open: &Loaded, index: usize) -> Vec<review_card::Line> {
    let (runs, as_proposed) = runs_of(open, index);
    review_card::body(&runs, open.set.items[index].before.as_ref(), as_proposed)
}

/// The body of item `index`'s card as it fits the screen, and how many lines were
/// left out.
fn fitted(open: &Loaded, index: usize) -> (Vec<review_card::Line>, usize) {
    let (rows, columns) = terminal::size().unwrap_or((CARD_ROWS_UNKNOWN, 80));
    // The card's own lines (header, summary, keys) and the prompt keep their rows.
    let budget = rows.saturating_sub(CARD_FRAME_ROWS).max(CARD_MIN_ROWS);
    review_card::fit(&whole_body(open, index), budget, columns)
}

/// The rows a card's header, summary, approvals and keys take around its body.
const CARD_FRAME_ROWS: usize = 12;
/// A card's body keeps at least this many rows, however small the screen.
const CARD_MIN_ROWS: usize = 10;
/// The rows assumed when the terminal does not say how many it has.
const CARD_ROWS_UNKNOWN: usize = 40;

/// What `e` opens as plain text in a file tool's arguments (issue 53, point 13:
/// editing a file meant editing a JSON string): `content` (Write), `new_string`
/// (Edit), or each edit's `new_string` (MultiEdit), as JSON pointers with what each
/// is for; `None` for any other call, whose arguments are edited as JSON.
fn plain_texts(runs: &Value) -> Option<Vec<(String, String)>> {
    let path = ["file_path", "path", "notebook_path"]
        .iter()
        .find_map(|key| runs.get(*key)?.as_str())?;
    let path = one_line(&render::visible(path)).into_owned();
    if runs.get("content").is_some_and(Value::is_string) {
        return Some(vec![(
            "/content".to_owned(),
            format!("the content written to {path}"),
        )]);
    }
    if runs.get("new_string").is_some_and(Value::is_string) {
        return Some(vec![(
            "/new_string".to_owned(),
            format!("the text that replaces old_string in {path}"),
        )]);
    }
    let edits = runs.get("edits")?.as_array()?;
    let all_text = !edits.is_empty()
        && edits
            .iter()
            .all(|edit| edit.get("new_string").is_some_and(Value::is_string));
    all_text.then(|| {
        edits
            .iter()
            .enumerate()
            .map(|(n, _)| {
                (
                    format!("/edits/{n}/new_string"),
                    format!(
                        "edit {} of {} of {path} (its new_string)",
                        n + 1,
                        edits.len()
                    ),
                )
            })
            .collect()
    })
}

/// The file name ending `e` gives the text of a file at `path`: its own extension
/// (so the editor reads it as what it is), else `.txt`.
fn text_suffix(runs: &Value) -> String {
    let extension = ["file_path", "path", "notebook_path"]
        .iter()
        .find_map(|key| runs.get(*key)?.as_str())
        .and_then(|path| std::path::Path::new(path).extension()?.to_str())
        .filter(|ext| ext.len() <= 12 && ext.chars().all(|c| c.is_ascii_alphanumeric()));
    format!(".{}", extension.unwrap_or("txt"))
}

/// What a person saved in their editor, as the text it stands for: an editor adds a
/// final newline to a text that had none, which is taken off again.
fn saved_text(original: &str, saved: String) -> String {
    if original.ends_with('\n') {
        return saved;
    }
    match saved
        .strip_suffix("\r\n")
        .or_else(|| saved.strip_suffix('\n'))
    {
        Some(text) => text.to_owned(),
        None => saved,
    }
}

/// `[5e72c9a1 0]`: an item named for a person.
fn label(set: Uuid, index: usize) -> String {
    format!("[{} {index}]", &set.simple().to_string()[..8])
}

impl Session<'_> {
    fn now(&self) -> OffsetDateTime {
        self.fixed_now.unwrap_or_else(OffsetDateTime::now_utc)
    }

    /// The confirmation service, bound to `revision`, on this database; `None` over a
    /// server (which decides through its own).
    fn service(&self, revision: u32) -> Option<ConfirmationService> {
        match &self.door {
            Door::Local(ctx) => Some(
                ctx.engine
                    .confirmations()
                    .by(self.reviewer.clone())
                    .shown_revision(revision),
            ),
            Door::Remote(_) => None,
        }
    }

    /// The server, when reviewing over one.
    fn server(&self) -> Option<&ReviewServer> {
        match &self.door {
            Door::Local(_) => None,
            Door::Remote(server) => Some(server),
        }
    }

    async fn run(&mut self, keys: &mut Keys) -> Result<(), CliError> {
        loop {
            let loaded = self.load().await?;
            self.raise_notices(&loaded);
            let waiting = waiting(&loaded, &self.reviewer, &self.skipped);
            match waiting.first() {
                Some(next) if self.shown != Some(*next) => {
                    self.show(&loaded, *next, waiting.len()).await?;
                }
                // A wait its door recorded after the card was shown: one line.
                Some(shown) => self.tell_wait(&loaded, *shown),
                None => {
                    self.shown = None;
                    if !self.idle_said {
                        say("Nothing waits for you now.");
                        self.idle_said = true;
                    }
                }
            }
            let event = tokio::select! {
                key = keys.next() => Event::Key(key?),
                written = self.written() => Event::Written(written?),
            };
            match event {
                Event::Key(key) => {
                    if !self.answer(key, &loaded, keys).await? {
                        return Ok(());
                    }
                }
                Event::Written(sets) => self.note_decided_elsewhere(&sets).await?,
            }
        }
    }

    /// The open sets (of `--agent`), oldest first, with what deciding needs.
    async fn load(&self) -> Result<Vec<Loaded>, CliError> {
        let ctx = match &self.door {
            Door::Local(ctx) => ctx,
            Door::Remote(server) => {
                return Ok(server
                    .open_sets(self.agent.as_deref())
                    .await?
                    .into_iter()
                    .map(|open| Loaded {
                        set: open.set,
                        quorum: open.quorum,
                        held: open.held,
                        waits_until: open.waits_until,
                    })
                    .collect());
            }
        };
        let mut filter = PendingFilter::all();
        filter.agent_id = self.agent.clone();
        let mut records = ctx.engine.set_records(&filter, None).await?;
        records.reverse();
        Ok(records
            .into_iter()
            .map(|record| Loaded {
                held: record
                    .jobs
                    .iter()
                    .filter(|job| job.scheduled())
                    .map(|job| job.item_index)
                    .collect(),
                set: record.set,
                quorum: record.quorum,
                waits_until: record.waits_until,
            })
            .collect())
    }

    /// A desktop notice for each set queued since the session started.
    fn raise_notices(&mut self, loaded: &[Loaded]) {
        let first_look = self.known.is_none();
        let known = self.known.get_or_insert_with(HashSet::new);
        for open in loaded {
            if !known.insert(open.set.id) || first_look || !self.notify {
                continue;
            }
            terminal::notify_set(&open.set);
        }
    }

    /// Prints the card of `next`, one of `of` waiting items.
    async fn show(&mut self, loaded: &[Loaded], next: Shown, of: usize) -> Result<(), CliError> {
        let Some(open) = loaded.iter().find(|open| open.set.id == next.set) else {
            return Ok(());
        };
        let item = &open.set.items[next.index];
        // The hold a confirmation starts is in the agent's settings, which a server's
        // API does not show to reviewers: over a server, the card names none.
        let hold = match &self.door {
            Door::Local(ctx) => {
                let settings = ctx.engine.tool_settings(&open.set.agent_id).await?;
                settings.requirements(&item.tool_name).hold
            }
            Door::Remote(_) => None,
        };
        let context = ReviewContext {
            place: (1, of),
            quorum: &open.quorum,
            hold: hold.and_then(|hold| time::Duration::try_from(hold).ok()),
            now: self.now(),
            waits_until: open.waits_until,
        };
        let (mut lines, left_out) = fitted(open, next.index);
        if left_out > 0 {
            lines.push(review_card::Line {
                kind: review_card::Kind::Hunk,
                text: format!(
                    "  … {left_out} more lines not shown, cut to fit the screen: v shows the whole call (y asks again before it confirms what you have not seen)"
                ),
            });
        }
        let body = review_card::draw(&lines, review_card::colour());
        say(&render::review_card(&open.set, next.index, &context, &body));
        self.shown = Some(next);
        self.unseen = left_out;
        self.warned = false;
        self.told_wait = open.waits_until;
        self.idle_said = false;
        Ok(())
    }

    /// Says how long the agent of the item on the screen still waits, when its door
    /// recorded that after the card was shown.
    fn tell_wait(&mut self, loaded: &[Loaded], shown: Shown) {
        let Some(until) = loaded
            .iter()
            .find(|open| open.set.id == shown.set)
            .and_then(|open| open.waits_until)
        else {
            return;
        };
        if self.told_wait != Some(until) {
            self.told_wait = Some(until);
            say(&format!(
                "{} {}",
                label(shown.set, shown.index),
                render::waits(until, self.now())
            ));
        }
    }

    /// The sets written since the last look, waiting for the first write.
    async fn written(&mut self) -> Result<Vec<Uuid>, CliError> {
        let ctx = match &mut self.door {
            Door::Local(ctx) => *ctx,
            Door::Remote(server) => {
                let mut written = server.written().await?;
                // A resync names no set: the one on the screen is looked at again.
                if written.contains(&Uuid::nil()) {
                    written.extend(self.shown.map(|shown| shown.set));
                }
                return Ok(written);
            }
        };
        loop {
            // A refusal writes no set: looked at on each turn, said once.
            self.refused.say_new(ctx).await?;
            let page = ctx.engine.feed_since(self.feed, FEED_BATCH).await?;
            self.feed = page.position;
            if !page.sets.is_empty() {
                return Ok(page.sets);
            }
            tokio::time::sleep(FEED_POLL).await;
        }
    }

    /// When the item on the screen was decided or changed by someone else, says so in
    /// one line; the next look shows what waits now.
    async fn note_decided_elsewhere(&mut self, written: &[Uuid]) -> Result<(), CliError> {
        let Some(shown) = self.shown.filter(|shown| written.contains(&shown.set)) else {
            return Ok(());
        };
        let Some(now) = self.item_now(shown).await? else {
            return Ok(());
        };
        let label = label(shown.set, shown.index);
        if now.status != ChangeItemStatus::Pending {
            let by = now
                .decided_by
                .map(|by| format!(" by {}", one_line(&render::visible(&by))))
                .unwrap_or_default();
            say(&format!("{label} {} elsewhere{by}", now.status.as_str()));
            self.shown = None;
        } else if now.revision != shown.revision {
            say(&format!(
                "{label} changed since it was shown (edited by another person or refreshed against its target); here it is again"
            ));
            self.shown = None;
        } else if now.held {
            say(&format!(
                "{label} confirmed elsewhere; it runs when its hold window ends"
            ));
            self.shown = None;
        }
        Ok(())
    }

    /// How item `shown` stands now (`None`: its set is gone).
    async fn item_now(&self, shown: Shown) -> Result<Option<ItemNow>, CliError> {
        let ctx = match &self.door {
            Door::Local(ctx) => ctx,
            Door::Remote(server) => {
                let Some(open) = server.set(shown.set).await? else {
                    return Ok(None);
                };
                return Ok(open.set.items.get(shown.index).map(|item| ItemNow {
                    status: item.status,
                    revision: item.revision,
                    decided_by: open.decided_by.get(shown.index).cloned().flatten(),
                    held: open.held.contains(&shown.index),
                }));
            }
        };
        let Some(set) = ctx.engine.change_set(shown.set).await? else {
            return Ok(None);
        };
        let Some(item) = set.items.get(shown.index) else {
            return Ok(None);
        };
        let decided_by = if item.status == ChangeItemStatus::Pending {
            None
        } else {
            ctx.engine
                .decisions_of(shown.set)
                .await?
                .into_iter()
                .rev()
                .find(|d| d.item_index == shown.index)
                .and_then(|d| d.decided_by)
        };
        let held = item.status == ChangeItemStatus::Pending
            && ctx
                .engine
                .served_item(ItemRef::new(shown.set, shown.index))
                .await?
                .and_then(|served| served.held)
                .is_some();
        Ok(Some(ItemNow {
            status: item.status,
            revision: item.revision,
            decided_by,
            held,
        }))
    }

    /// Acts on `key`; `false` when the person quits.
    async fn answer(
        &mut self,
        key: Key,
        loaded: &[Loaded],
        keys: &mut Keys,
    ) -> Result<bool, CliError> {
        let key = match key {
            // `S` and `E` are keys of their own; any other letter counts in either case.
            Key::Char(c @ ('S' | 'E')) => c,
            Key::Char(c) => c.to_ascii_lowercase(),
            Key::CtrlC | Key::Escape => 'q',
            _ => return Ok(true),
        };
        // A second `y` (or `S`, `a`) confirms unread only right after the first.
        let warned = std::mem::take(&mut self.warned);
        match key {
            'q' => return Ok(false),
            '?' | 'h' => {
                say(HELP);
                return Ok(true);
            }
            _ => {}
        }
        let Some(shown) = self.shown else {
            say("Nothing to decide yet; ? for the keys, q to quit.");
            return Ok(true);
        };
        let Some(open) = loaded.iter().find(|open| open.set.id == shown.set) else {
            return Ok(true);
        };
        let span =
            tracing::info_span!("review_decision", set = %shown.set, index = shown.index, %key);
        let _entered = span.enter();
        if matches!(key, 'y' | 'S') && self.unseen > 0 && !warned {
            self.warned = true;
            say(&format!(
                "{} {} lines of it were not shown: v shows the whole call first; {key} again confirms it unread",
                label(shown.set, shown.index),
                self.unseen
            ));
            return Ok(true);
        }
        match key {
            'y' => self.confirm(shown).await?,
            'S' => {
                if !self.for_session(shown, open, keys).await? {
                    return Ok(true);
                }
            }
            'v' => {
                self.view(open, shown, keys).await?;
                return Ok(true);
            }
            'n' => self.reject(shown, keys).await?,
            'e' => match plain_texts(&runs_of(open, shown.index).0) {
                Some(texts) => self.edit_text(shown, open, &texts).await?,
                None => self.edit(shown, open).await?,
            },
            'E' => self.edit(shown, open).await?,
            'd' => self.defer(shown).await?,
            's' => {
                self.skipped.insert((shown.set, shown.index));
                say(&format!(
                    "{} skipped; it stays waiting (`assent pending` lists it)",
                    label(shown.set, shown.index)
                ));
            }
            'a' => {
                let rest: Vec<Shown> =
                    waiting(std::slice::from_ref(open), &self.reviewer, &self.skipped)
                        .into_iter()
                        .filter(|item| item.index >= shown.index)
                        .collect();
                // The rest were never on the screen: one whose card would leave lines
                // out is not confirmed unread without a second `a`.
                let unseen: usize = rest
                    .iter()
                    .map(|item| {
                        if item.index == shown.index {
                            self.unseen
                        } else {
                            fitted(open, item.index).1
                        }
                    })
                    .sum();
                if unseen > 0 && !warned {
                    self.warned = true;
                    say(&format!(
                        "{unseen} lines of the rest of this set do not fit on a card and were not shown: confirm one item at a time to see each, or a again to confirm them unread"
                    ));
                    return Ok(true);
                }
                for item in rest {
                    self.confirm(item).await?;
                }
            }
            _ => {
                say("Not a key of the reviewer; ? for the keys.");
                return Ok(true);
            }
        }
        self.shown = None;
        Ok(true)
    }

    /// Confirms `item` as shown, and says what came of it.
    async fn confirm(&self, item: Shown) -> Result<(), CliError> {
        if let Some(service) = self.service(item.revision) {
            match service
                .confirm_item(
                    assent_confirm::ItemRef::new(item.set, item.index),
                    self.now(),
                )
                .await
            {
                Ok(outcome) => say(&render::confirmed(item.index, &outcome)),
                Err(error) => refused(item, error),
            }
        } else if let Some(server) = self.server() {
            match server.confirm(item.set, item.index, item.revision).await? {
                Ok(answer) => say(&remote_confirmed(item.index, &answer)),
                Err(problem) => refused_remote(item, &problem),
            }
        }
        Ok(())
    }

    /// Defers `item`: it stays open.
    async fn defer(&self, item: Shown) -> Result<(), CliError> {
        if let Some(service) = self.service(item.revision) {
            match service
                .defer_item(
                    assent_confirm::ItemRef::new(item.set, item.index),
                    self.now(),
                )
                .await
            {
                Ok(decision) => say(&render::decision(&decision)),
                Err(error) => refused(item, error),
            }
        } else if let Some(server) = self.server() {
            match server.defer(item.set, item.index).await? {
                Ok(answer) => say(&remote_decision(&answer)),
                Err(problem) => refused_remote(item, &problem),
            }
        }
        Ok(())
    }

    /// Asks for a reason and rejects `item`; Escape rejects nothing.
    async fn reject(&self, item: Shown, keys: &mut Keys) -> Result<(), CliError> {
        let Some(reason) = keys
            .line("Reason (Enter for none, Escape to go back): ")
            .await?
        else {
            say("Not rejected.");
            return Ok(());
        };
        let reason = Some(reason.trim().to_owned()).filter(|r| !r.is_empty());
        if let Some(service) = self.service(item.revision) {
            match service
                .reject_item(
                    assent_confirm::ItemRef::new(item.set, item.index),
                    reason,
                    self.now(),
                )
                .await
            {
                Ok(decision) => {
                    debug_assert_eq!(decision.verdict, Verdict::Rejected);
                    say(&render::decision(&decision));
                }
                Err(error) => refused(item, error),
            }
        } else if let Some(server) = self.server() {
            match server.reject(item.set, item.index, reason).await? {
                Ok(answer) => say(&remote_decision(&answer)),
                Err(problem) => refused_remote(item, &problem),
            }
        }
        Ok(())
    }

    /// Opens the editor on the arguments that would run, as pretty JSON, and confirms
    /// what the person saves; JSON that is not an object, or that the tool's schema
    /// refuses, is shown and the editor opened again. An empty or unchanged file edits
    /// nothing.
    async fn edit(&self, item: Shown, open: &Loaded) -> Result<(), CliError> {
        let proposed = &open.set.items[item.index].args;
        let runs = open
            .quorum
            .items
            .iter()
            .find(|(i, _, _)| *i == item.index)
            .and_then(|(_, _, revision)| revision.args.clone())
            .unwrap_or_else(|| proposed.clone());
        let shown = serde_json::to_string_pretty(&runs)
            .map_err(|e| CliError::failed(format!("cannot write the arguments as JSON: {e}")))?;
        let mut text = format!("{shown}\n");
        loop {
            let saved = terminal::edit(&text)?;
            if saved.trim().is_empty() {
                say("Edit abandoned (the file was empty); nothing was decided.");
                return Ok(());
            }
            let problem = match serde_json::from_str::<Value>(&saved) {
                Ok(args) if args == runs => {
                    say(
                        "The arguments are unchanged; nothing was decided (y confirms them as they are).",
                    );
                    return Ok(());
                }
                Ok(args) if args.is_object() => match self.edit_and_confirm(item, args).await? {
                    Edited::Done => return Ok(()),
                    Edited::Invalid(problem) => problem,
                },
                Ok(_) => "the arguments must be a JSON object".to_owned(),
                Err(error) => format!("not valid JSON: {error}"),
            };
            say(&format!(
                "{}: {}; the editor opens again (save an empty file to give up)",
                label(item.set, item.index),
                one_line(&render::visible(&problem))
            ));
            text = saved;
        }
    }
}

impl Session<'_> {
    /// `v`: the whole call, every line of every argument, through `$PAGER` or page by
    /// page here; afterwards `y` confirms at once.
    async fn view(&mut self, open: &Loaded, shown: Shown, keys: &mut Keys) -> Result<(), CliError> {
        let context = ReviewContext {
            place: (1, 1),
            quorum: &open.quorum,
            hold: None,
            now: self.now(),
            waits_until: open.waits_until,
        };
        let colour = review_card::colour();
        let body = review_card::draw(&whole_body(open, shown.index), colour);
        let card = render::review_card(&open.set, shown.index, &context, &body);
        match terminal::pager() {
            Some(pager) => terminal::page(&pager, &card)?,
            None => page_here(&card, keys).await?,
        }
        self.unseen = 0;
        say(&format!(
            "{} seen whole.\n{}",
            label(shown.set, shown.index),
            render::REVIEW_KEYS.trim_end()
        ));
        Ok(())
    }

    /// `S`: confirms `shown` and grants the rest of its coding agent's session, with a
    /// suggested pattern the person accepts, edits, or clears (then the grant binds the
    /// command or the path alone, never the agent's free-text description). `false`
    /// when nothing was decided (no session, or Escape).
    async fn for_session(
        &self,
        shown: Shown,
        open: &Loaded,
        keys: &mut Keys,
    ) -> Result<bool, CliError> {
        let Some(session) = assent_confirm::session_of(&open.set) else {
            say(&format!(
                "{} is not a coding agent's call that named its session: S has no session to allow it for (y confirms this call only)",
                label(shown.set, shown.index)
            ));
            return Ok(false);
        };
        let item = &open.set.items[shown.index];
        let (runs, _) = runs_of(open, shown.index);
        let suggested = assent_confirm::grants::suggested_session_pattern(
            &item.tool_name,
            &runs,
            &open.set.target_id,
        )
        .unwrap_or_default();
        let binds = assent_confirm::grants::session_binding(&runs);
        say(&format!(
            "For the rest of session {}: Enter accepts the pattern, or edit it; clear it to allow exactly {} again (any description); Escape goes back.",
            one_line(&render::visible(session)),
            one_line(&render::visible(&assent_domain::canonical_json(&binds)))
        ));
        let Some(pattern) = keys.line_from("Pattern: ", &suggested).await? else {
            say("Not confirmed.");
            return Ok(false);
        };
        let pattern = Some(pattern.trim().to_owned()).filter(|p| !p.is_empty());
        let item_ref = assent_confirm::ItemRef::new(shown.set, shown.index);
        if let Some(service) = self.service(shown.revision) {
            match service
                .confirm_for_session(item_ref, pattern.as_deref(), self.now())
                .await
            {
                Ok((outcome, grant)) => say(&format!(
                    "{}\n{}",
                    render::confirmed(shown.index, &outcome),
                    render::session_granted(&grant)
                )),
                Err(error) => refused(shown, error),
            }
        } else if let Some(server) = self.server() {
            match server
                .confirm_for_session(shown.set, shown.index, shown.revision, pattern.as_deref())
                .await?
            {
                Ok(answer) => say(&format!(
                    "{}\n{}",
                    remote_confirmed(shown.index, &answer),
                    remote_granted(&answer["sessionGrant"])
                )),
                Err(problem) => refused_remote(shown, &problem),
            }
        }
        Ok(true)
    }

    /// `e` on a file tool: each of `texts` (JSON pointers into the arguments that run)
    /// opened as plain text in the person's editor, one after the other; what they
    /// saved replaces it and the call is confirmed with it. The other arguments stay
    /// as they are (`E` edits them as JSON). Saved unchanged, nothing is decided.
    async fn edit_text(
        &self,
        item: Shown,
        open: &Loaded,
        texts: &[(String, String)],
    ) -> Result<(), CliError> {
        let (runs, _) = runs_of(open, item.index);
        let suffix = text_suffix(&runs);
        let mut edited = runs.clone();
        for (pointer, what) in texts {
            let Some(original) = runs.pointer(pointer).and_then(Value::as_str) else {
                continue;
            };
            say(&format!(
                "{} editing {what} as plain text; save it unchanged to leave it as it is",
                label(item.set, item.index)
            ));
            let saved = saved_text(original, terminal::edit_as(original, &suffix)?);
            if let Some(slot) = edited.pointer_mut(pointer) {
                *slot = Value::String(saved);
            }
        }
        if edited == runs {
            say("The text is unchanged; nothing was decided (y confirms it as it is).");
            return Ok(());
        }
        if let Edited::Invalid(problem) = self.edit_and_confirm(item, edited).await? {
            say(&format!(
                "{} not decided: {}; e opens the editor again",
                label(item.set, item.index),
                one_line(&render::visible(&problem))
            ));
        }
        Ok(())
    }
}

/// The built-in pager: `text` a screen at a time, Space or Enter for the next, `q`
/// (or Escape) to stop.
async fn page_here(text: &str, keys: &mut Keys) -> Result<(), CliError> {
    let (rows, _) = terminal::size().unwrap_or((CARD_ROWS_UNKNOWN, 80));
    let page = rows.saturating_sub(1).max(5);
    let lines: Vec<&str> = text.lines().collect();
    let mut start = 0;
    while start < lines.len() {
        let end = (start + page).min(lines.len());
        say(&lines[start..end].join("\n"));
        if end == lines.len() {
            break;
        }
        say(&format!(
            "-- lines {}-{end} of {}: Space or Enter for more, q to stop --",
            start + 1,
            lines.len()
        ));
        match keys.next().await? {
            Key::Char(' ') | Key::Enter => start = end,
            _ => break,
        }
    }
    Ok(())
}

/// A server's `sessionGrant` as [`render::session_granted`] says a local one.
fn remote_granted(grant: &Value) -> String {
    let covers = match grant["callPattern"].as_str() {
        Some(pattern) => format!("as {pattern}"),
        None => format!(
            "with exactly {}",
            assent_domain::canonical_json(&grant["argsPattern"])
        ),
    };
    one_line(&render::visible(&format!(
        "Allowed for the rest of session {} without asking: {} {covers} (grant {}; `assent grants revoke {}` takes it back)",
        grant["sessionId"].as_str().unwrap_or_default(),
        grant["toolName"].as_str().unwrap_or_default(),
        grant["id"].as_str().unwrap_or_default(),
        grant["id"].as_str().unwrap_or_default(),
    )))
    .into_owned()
}

/// What an edit came to.
enum Edited {
    /// Confirmed, or refused for another reason than the arguments: said.
    Done,
    /// The tool's schema refused the arguments: why (the editor opens again).
    Invalid(String),
}

impl Session<'_> {
    /// Confirms `item` with the edited `args`.
    async fn edit_and_confirm(&self, item: Shown, args: Value) -> Result<Edited, CliError> {
        if let Some(service) = self.service(item.revision) {
            return Ok(
                match service
                    .edit_and_confirm(
                        assent_confirm::ItemRef::new(item.set, item.index),
                        args,
                        self.now(),
                    )
                    .await
                {
                    Ok(outcome) => {
                        say(&render::confirmed(item.index, &outcome));
                        Edited::Done
                    }
                    Err(error @ ConfirmError::InvalidArgs { .. }) => {
                        Edited::Invalid(error.to_string())
                    }
                    Err(error) => {
                        refused(item, error);
                        Edited::Done
                    }
                },
            );
        }
        let Some(server) = self.server() else {
            return Ok(Edited::Done);
        };
        Ok(
            match server
                .edit(item.set, item.index, args, item.revision)
                .await?
            {
                Ok(answer) => {
                    say(&remote_confirmed(item.index, &answer));
                    Edited::Done
                }
                // The server refuses arguments its tool's schema does not take as a
                // bad request, and every other refusal otherwise.
                Err(problem) if problem.ends_with("(400)") => Edited::Invalid(problem),
                Err(problem) => {
                    refused_remote(item, &problem);
                    Edited::Done
                }
            },
        )
    }
}

/// A server's answer to a confirmation (`{decision, message, approvals?}`) as
/// [`render::confirmed`] says it.
fn remote_confirmed(index: usize, answer: &Value) -> String {
    let message = answer["message"].as_str().unwrap_or_default();
    match serde_json::from_value::<assent_domain::ChangeDecision>(answer["decision"].clone()) {
        Ok(decision) => {
            render::confirmed_line(index, &decision, answer.get("approvals").is_some(), message)
        }
        Err(_) => format!("[{index}] {}", one_line(&render::visible(message))),
    }
}

/// A server's answer to a rejection or a deferral (the decision) as
/// [`render::decision`] says it.
fn remote_decision(answer: &Value) -> String {
    match serde_json::from_value::<assent_domain::ChangeDecision>(answer.clone()) {
        Ok(decision) => render::decision(&decision),
        Err(_) => one_line(&render::visible(&answer.to_string())).into_owned(),
    }
}

/// Says in one line why the server refused a decision on `item`.
fn refused_remote(item: Shown, problem: &str) {
    say(&format!(
        "{} not decided: {}",
        label(item.set, item.index),
        one_line(&render::visible(problem))
    ));
}

/// Says in one line why a decision on `item` was refused; the session goes on.
fn refused(item: Shown, error: ConfirmError) {
    say(&format!(
        "{} not decided: {}",
        label(item.set, item.index),
        render::visible(&CliError::from(error).one_line())
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_confirm::records::{Approval, Revision};
    use assent_domain::{ChangeItem, NewChangeSet, Target};
    use serde_json::json;

    fn set(id: u128, items: usize) -> ChangeSet {
        let created = OffsetDateTime::UNIX_EPOCH;
        ChangeSet::new(NewChangeSet {
            id: Uuid::from_u128(id),
            agent_id: "a".into(),
            target: Target::new("task", "t"),
            thread_id: "th".into(),
            run_key: "r".into(),
            items: (0..items)
                .map(|i| ChangeItem::new(format!("tool{i}"), json!({}), "s"))
                .collect(),
            created_at: created,
        })
        .expect("a valid set")
    }

    #[test]
    fn waiting_skips_what_this_reviewer_cannot_or_need_not_decide() {
        let mut first = set(1, 4);
        first.items[1].status = ChangeItemStatus::Confirmed;
        let approved = Revision {
            approvals: vec![Approval {
                by: "alice".into(),
                at: OffsetDateTime::UNIX_EPOCH,
            }],
            ..Revision::default()
        };
        let loaded = vec![
            Loaded {
                set: first,
                quorum: Quorum {
                    items: vec![(2, 2, approved)],
                },
                held: vec![3],
                waits_until: None,
            },
            Loaded {
                set: set(2, 2),
                quorum: Quorum { items: Vec::new() },
                held: Vec::new(),
                waits_until: None,
            },
        ];
        let skipped = HashSet::from([(Uuid::from_u128(2), 0)]);
        let names: Vec<(u128, usize)> = waiting(&loaded, "alice", &skipped)
            .iter()
            .map(|s| (s.set.as_u128(), s.index))
            .collect();
        assert_eq!(names, [(1, 0), (2, 1)]);
        let for_bob: Vec<usize> = waiting(&loaded, "bob", &HashSet::new())
            .iter()
            .map(|s| s.index)
            .collect();
        assert_eq!(for_bob, [0, 2, 0, 1], "bob's approval is the one missing");
    }
}
