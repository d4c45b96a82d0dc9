//! "Yes, for this session": a person's confirmation of a coding agent's hook call that
//! also lets the later calls of the same agent, in the same session of that coding
//! agent (the hook event's `session_id`), of the same tool, with arguments a pattern the
//! person saw covers, run without asking. The grant is an ordinary grant row (listed by
//! `assent grants`, revoked by `assent grants revoke`, entered on the consent chain),
//! with the session and the pattern; the hook (`assent-hook`) looks it up before it
//! asks, and the proof checks each run under it against the same function
//! (`assent_store::delegation::session_covers`).
//!
//! A session grant never stands in for a quorum or a hold: a tool that needs more than
//! one person or waits out a window is refused one, and the hook asks as before.

use crate::{ConfirmError, ConfirmOutcome, ConfirmationService};
use assent_domain::{ChangeSet, ItemRef, OffsetDateTime, Uuid};
use assent_store::delegation::{self, Grant};
use assent_store::{agents, change_sets};
use assent_tools::{CallContext, Coverage, RuleAction, ToolRule, call_covers};
use serde_json::Value;

/// How a hook's change set names the coding agent's session it came from (its
/// `thread_id`): this prefix and the event's `session_id`.
pub const SESSION_THREAD_PREFIX: &str = "hook-session:";

/// The target kind of a hook's calls (the workspace): only their sets take a session
/// answer.
pub(crate) const HOOK_TARGET_KIND: &str = "workspace";

/// The target kind of the MCP gateway's calls (`assent_mcp::TARGET_KIND`).
pub(crate) const MCP_TARGET_KIND: &str = "mcp";

/// The `thread_id` of a hook's change set for coding-agent session `session_id`.
pub fn session_thread(session_id: &str) -> String {
    format!("{SESSION_THREAD_PREFIX}{session_id}")
}

/// The coding-agent session a change set came from, when it is a hook's set whose
/// event named one.
pub fn session_of(set: &ChangeSet) -> Option<&str> {
    if set.target_kind != HOOK_TARGET_KIND {
        return None;
    }
    set.thread_id
        .strip_prefix(SESSION_THREAD_PREFIX)
        .filter(|session| !session.is_empty())
}

impl ConfirmationService {
    /// Confirms item `index` of set `change_set_id` like [`Self::confirm_item`] and
    /// grants the rest of its session: later calls of the set's agent in the same
    /// coding-agent session, of the item's tool, that `pattern` covers (a rule pattern
    /// `TOOL(ARG)` of the item's own tool, e.g. `Bash(git status*)`, that covers this
    /// call), or when `pattern` is `None` with what this item's arguments run: its
    /// command (and how it runs) or its path, never the agent's free-text
    /// `description` ([`delegation::session_binding`]). Every
    /// check is made before anything is written: a set with no session, a pattern of
    /// another tool or that does not cover the call, or a tool that needs a quorum or
    /// a hold is refused ([`ConfirmError::InvalidGrant`]) and nothing changes. The
    /// grant names the confirmation's decision as the answer that created it.
    #[tracing::instrument(skip(self), fields(change_set = %item))]
    pub async fn confirm_for_session(
        &self,
        item: ItemRef,
        pattern: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<(ConfirmOutcome, Grant), ConfirmError> {
        let ItemRef {
            change_set_id,
            index,
        } = item;
        let grant = self
            .session_grant(change_set_id, index, pattern, now)
            .await?;
        let outcome = self
            .confirm_item(assent_domain::ItemRef::new(change_set_id, index), now)
            .await?;
        let grant = Grant {
            correlation_id: outcome.decision.id.to_string(),
            ..grant
        };
        let mut tx = self.engine.store().begin_write().await?;
        delegation::insert_grant(tx.connection(), &grant, now).await?;
        tx.commit().await?;
        tracing::info!(grant = %grant.id, session = ?grant.session_id, "session grant stored");
        Ok((outcome, grant))
    }

    /// The session grant a "yes, for this session" answer to item `index` would give,
    /// checked but not written.
    async fn session_grant(
        &self,
        change_set_id: Uuid,
        index: usize,
        pattern: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Grant, ConfirmError> {
        let mut conn = self.engine.store().read_connection().await?;
        let set = change_sets::load(&mut conn, change_set_id)
            .await?
            .ok_or(ConfirmError::ChangeSetNotFound(change_set_id))?;
        let item = set.items.get(index).ok_or(ConfirmError::ItemNotFound {
            change_set_id,
            index,
            len: set.items.len(),
        })?;
        let invalid = |why: String| {
            Err(ConfirmError::InvalidGrant(format!(
                "change set {change_set_id} item {index} ({}): {why}",
                item.tool_name
            )))
        };
        let Some(session) = session_of(&set) else {
            return invalid(
                "not a coding agent's hook call that named its session, so there is no session to allow it for".to_owned(),
            );
        };
        if let Some(pattern) = pattern {
            if let Err(error) = ToolRule::new(pattern, RuleAction::Allow) {
                return invalid(error.to_string());
            }
            // The tool is named exactly: a session grant is for the tool the person
            // answered, never for every tool a glob might also match.
            let own_tool = pattern
                .strip_prefix(item.tool_name.as_str())
                .is_some_and(|rest| rest.starts_with('(') && rest.ends_with(')'));
            if !own_tool {
                return invalid(format!(
                    "the pattern {pattern:?} is not written {}(ARGUMENT) for the tool answered",
                    item.tool_name
                ));
            }
            let call = CallContext {
                args: &item.args,
                target_id: &set.target_id,
                paths: None,
            };
            if call_covers(pattern, &item.tool_name, Some(call)) != Coverage::Yes {
                return invalid(format!(
                    "the pattern {pattern:?} does not surely cover the call answered"
                ));
            }
        }
        let (_, settings) = agents::rules_at(&mut conn, &set.agent_id, now)
            .await?
            .ok_or_else(|| ConfirmError::UnknownAgent(set.agent_id.clone()))?;
        let needs = settings.requirements(&item.tool_name);
        if needs.approvals_needed > 1 {
            return invalid(format!(
                "its tool needs {} people's approval, which a session grant cannot stand in for",
                needs.approvals_needed
            ));
        }
        if needs.hold.is_some() {
            return invalid(
                "its tool is held for a window before it runs, which a session grant cannot skip"
                    .to_owned(),
            );
        }
        Ok(Grant {
            id: self.engine.new_id(),
            agent_id: Some(set.agent_id.clone()),
            agent_path: set.agent_id.clone(),
            tool_name: item.tool_name.clone(),
            // Without a pattern, what runs (the command or the path), never the
            // agent's free text about it (issue 53).
            args_pattern: pattern
                .is_none()
                .then(|| delegation::session_binding(&item.args)),
            correlation_id: String::new(),
            created_at: now,
            revoked_at: None,
            session_id: Some(session.to_owned()),
            call_pattern: pattern.map(str::to_owned),
        })
    }
}

/// The pattern "yes, for this session" suggests for a call of `tool` with `args` in
/// workspace `target_id`, for the person to accept, edit or clear: a command's first
/// two words when both are plain words (`git status --short` gives
/// `Bash(git status:*)`), its first alone when only flags follow (`ls -la`), or the
/// folder of a file tool's path (`Edit(src/*)`). `None`
/// when no such pattern surely covers the call (a chained command, a path with
/// `..`, another kind of tool): the grant then binds the command or path alone.
pub fn suggested_session_pattern(tool: &str, args: &Value, target_id: &str) -> Option<String> {
    let text = |keys: &[&str]| keys.iter().find_map(|key| args.get(*key)?.as_str());
    let argument = if let Some(command) = text(&["command", "cmd"]) {
        let plain = |word: &&str| {
            !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !word.starts_with('-')
        };
        let all: Vec<&str> = command.split_whitespace().collect();
        let words: Vec<&str> = all.iter().take(2).copied().take_while(plain).collect();
        // One word is suggested alone only when flags are all that follow it: `ls -la`
        // gives `ls:*`, while `rm -rf build` suggests nothing, since `rm:*` would
        // allow removing anything (THREATS 10: a yes covers what the person saw).
        let flags_only = all.iter().skip(1).all(|word| word.starts_with('-'));
        match words.len() {
            2 => format!("{}:*", words.join(" ")),
            1 if flags_only => format!("{}:*", words[0]),
            _ => return None,
        }
    } else {
        let path = text(&["file_path", "path", "notebook_path"])?;
        let (folder, _) = path.rsplit_once('/')?;
        if folder.is_empty() {
            return None;
        }
        format!("{folder}/*")
    };
    let pattern = format!("{tool}({argument})");
    let call = CallContext {
        args,
        target_id,
        paths: None,
    };
    (ToolRule::new(&pattern, RuleAction::Allow).is_ok()
        && call_covers(&pattern, tool, Some(call)) == Coverage::Yes)
        .then_some(pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggested_pattern_covers_the_call_and_no_chained_command() {
        let suggest = |tool: &str, args: Value| suggested_session_pattern(tool, &args, "/w");
        use serde_json::json;
        assert_eq!(
            suggest(
                "Bash",
                json!({"command": "git status --short", "description": "x"})
            ),
            Some("Bash(git status:*)".to_owned())
        );
        assert_eq!(
            suggest("Bash", json!({"command": "ls -la"})),
            Some("Bash(ls:*)".to_owned())
        );
        assert_eq!(
            suggest("Bash", json!({"command": "git status; rm -rf /"})),
            None
        );
        assert_eq!(suggest("Bash", json!({"command": "./run.sh"})), None);
        assert_eq!(suggest("Bash", json!({"command": "rm -rf build"})), None);
        assert_eq!(
            suggest("Bash", json!({"command": "npm test"})),
            Some("Bash(npm test:*)".to_owned())
        );
        assert_eq!(
            suggest(
                "Edit",
                json!({"file_path": "/w/src/main.rs", "old_string": "a", "new_string": "b"})
            ),
            Some("Edit(/w/src/*)".to_owned())
        );
        assert_eq!(
            suggest("Write", json!({"file_path": "../x/y", "content": ""})),
            None
        );
        assert_eq!(suggest("create_issue", json!({"repo": "acme/web"})), None);
    }

    #[test]
    fn only_a_hooks_set_with_a_session_names_one() {
        let mut set = ChangeSet::new(assent_domain::NewChangeSet {
            id: Uuid::nil(),
            agent_id: "coder".into(),
            target: assent_domain::Target::new(HOOK_TARGET_KIND, "/w"),
            thread_id: session_thread("s-1"),
            run_key: "hook:s-1:t".into(),
            items: vec![assent_domain::ChangeItem::new(
                "Bash",
                serde_json::json!({"command": "ls"}),
                "Bash: ls",
            )],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        assert_eq!(session_of(&set), Some("s-1"));
        set.thread_id = SESSION_THREAD_PREFIX.to_owned();
        assert_eq!(session_of(&set), None);
        set.thread_id = session_thread("s-1");
        set.target_kind = "task".into();
        assert_eq!(session_of(&set), None);
    }
}
