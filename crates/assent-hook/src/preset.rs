//! Starter rules for a coding agent (`assent hook install KIND --preset read-only`,
//! issue 53, point 11): the agent's own plumbing (reading files, searching, its to-do
//! list, looking up its tools and skills) and the shell commands that only read
//! (`git status`, `git diff`, `git log`, `ls`) run without a person, so a person is
//! asked about what changes something. Pure data: the CLI applies each rule through
//! the same rule change as `assent agent allow`.
//!
//! Each agent names its tools its own way (`Read` and `Bash` for Claude Code,
//! `read_file` and `run_shell_command` for Gemini CLI): the lists follow the names
//! each agent sends to its hook (`kind.rs`, and the event fixtures of the CLI's tests).
//! Left out on purpose: anything that writes (`Write`, `Edit`, `save_memory`), runs
//! another command (`SlashCommand`, `KillShell`), or sends data out (`WebFetch`,
//! `WebSearch`, `web_fetch`, `google_web_search`): a person adds those with `assent
//! agent allow` when they want them.

use crate::AgentKind;
use tool_names::*;

/// A named set of starter rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Preset {
    /// The agent's read-only and internal tools, and read-only shell commands.
    ReadOnly,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Self; 1] = [Self::ReadOnly];

    /// The name on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|preset| preset.as_str() == s)
            .ok_or_else(|| format!("unknown preset {s:?} (expected read-only)"))
    }
}

/// One rule of a preset: the pattern, what it does with a call, and why it is there
/// (shown before it is applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PresetRule {
    /// The rule's pattern, in the agent's own tool names.
    pub pattern: &'static str,
    /// `allow`, or `ask` for a form of an allowed command that writes.
    pub action: assent_tools::RuleAction,
    /// Why, in a few words.
    pub why: &'static str,
}

/// The shell commands that only read, for a shell tool named `shell`: the same
/// commands for every agent. `git diff` and `git log` write a file with `--output`:
/// that form is asked about (ask wins over allow).
fn read_only_commands(shell: &'static str) -> Vec<PresetRule> {
    let allow = |pattern, why| PresetRule {
        pattern,
        action: assent_tools::RuleAction::Allow,
        why,
    };
    let ask = |pattern, why| PresetRule {
        pattern,
        action: assent_tools::RuleAction::Ask,
        why,
    };
    match shell {
        CLAUDE_SHELL => vec![
            allow("Bash(git status:*)", READS_GIT),
            allow("Bash(git diff:*)", READS_GIT),
            allow("Bash(git log:*)", READS_GIT),
            allow("Bash(ls:*)", LISTS),
            ask("Bash(git diff *--output*)", WRITES_OUTPUT),
            ask("Bash(git log *--output*)", WRITES_OUTPUT),
        ],
        GEMINI_SHELL => vec![
            allow("run_shell_command(git status:*)", READS_GIT),
            allow("run_shell_command(git diff:*)", READS_GIT),
            allow("run_shell_command(git log:*)", READS_GIT),
            allow("run_shell_command(ls:*)", LISTS),
            ask("run_shell_command(git diff *--output*)", WRITES_OUTPUT),
            ask("run_shell_command(git log *--output*)", WRITES_OUTPUT),
        ],
        CURSOR_SHELL => vec![
            allow("Shell(git status:*)", READS_GIT),
            allow("Shell(git diff:*)", READS_GIT),
            allow("Shell(git log:*)", READS_GIT),
            allow("Shell(ls:*)", LISTS),
            ask("Shell(git diff *--output*)", WRITES_OUTPUT),
            ask("Shell(git log *--output*)", WRITES_OUTPUT),
        ],
        COPILOT_SHELL => vec![
            allow("bash(git status:*)", READS_GIT),
            allow("bash(git diff:*)", READS_GIT),
            allow("bash(git log:*)", READS_GIT),
            allow("bash(ls:*)", LISTS),
            ask("bash(git diff *--output*)", WRITES_OUTPUT),
            ask("bash(git log *--output*)", WRITES_OUTPUT),
        ],
        _ => vec![
            allow("run_in_terminal(git status:*)", READS_GIT),
            allow("run_in_terminal(git diff:*)", READS_GIT),
            allow("run_in_terminal(git log:*)", READS_GIT),
            allow("run_in_terminal(ls:*)", LISTS),
            ask("run_in_terminal(git diff *--output*)", WRITES_OUTPUT),
            ask("run_in_terminal(git log *--output*)", WRITES_OUTPUT),
        ],
    }
}

/// The tool names the presets use, per agent.
mod tool_names {
    pub(super) const CLAUDE_SHELL: &str = "Bash";
    pub(super) const GEMINI_SHELL: &str = "run_shell_command";
    pub(super) const CURSOR_SHELL: &str = crate::event::CURSOR_SHELL_TOOL;
    pub(super) const COPILOT_SHELL: &str = "bash";
    pub(super) const VSCODE_SHELL: &str = "run_in_terminal";
    pub(super) const READS: &str = "reads or searches files";
    pub(super) const INTERNAL: &str = "the agent's own plumbing: changes nothing";
    pub(super) const READS_GIT: &str = "reads the repository";
    pub(super) const LISTS: &str = "lists files";
    pub(super) const WRITES_OUTPUT: &str = "writes a file: asked about";
}

/// The tools of `kind` that only read, and its internal ones.
fn read_only_tools(kind: AgentKind) -> &'static [(&'static str, &'static str)] {
    match kind {
        AgentKind::ClaudeCode => &[
            ("Read", READS),
            ("Glob", READS),
            ("Grep", READS),
            ("LS", READS),
            ("NotebookRead", READS),
            ("LSP", READS),
            ("BashOutput", READS),
            ("TaskOutput", READS),
            ("ListMcpResourcesTool", READS),
            ("ReadMcpResourceTool", READS),
            ("TodoRead", INTERNAL),
            ("TodoWrite", INTERNAL),
            ("ToolSearch", INTERNAL),
            ("Skill", INTERNAL),
            ("ListAgents", INTERNAL),
            ("AskUserQuestion", INTERNAL),
            ("EnterPlanMode", INTERNAL),
            ("ExitPlanMode", INTERNAL),
        ],
        AgentKind::Gemini => &[
            ("read_file", READS),
            ("read_many_files", READS),
            ("glob", READS),
            ("grep_search", READS),
            ("search_file_content", READS),
            ("list_directory", READS),
            ("write_todos", INTERNAL),
            ("activate_skill", INTERNAL),
            ("ask_user", INTERNAL),
            ("enter_plan_mode", INTERNAL),
            ("exit_plan_mode", INTERNAL),
        ],
        // Codex sends its shell to the hook (`Bash`), nothing else it only reads.
        AgentKind::Codex => &[],
        AgentKind::Cursor => &[("Read", READS), ("Grep", READS), ("Glob", READS)],
        AgentKind::Copilot => &[("view", READS), ("glob", READS), ("grep", READS)],
        AgentKind::Vscode => &[
            ("read_file", READS),
            ("list_dir", READS),
            ("file_search", READS),
            ("grep_search", READS),
            ("semantic_search", READS),
            ("get_errors", READS),
            ("manage_todo_list", INTERNAL),
        ],
    }
}

/// The shell tool `kind` sends to its hook.
fn shell_of(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::ClaudeCode | AgentKind::Codex => CLAUDE_SHELL,
        AgentKind::Gemini => GEMINI_SHELL,
        AgentKind::Cursor => CURSOR_SHELL,
        AgentKind::Copilot => COPILOT_SHELL,
        AgentKind::Vscode => VSCODE_SHELL,
    }
}

/// The rules `preset` sets for an agent of `kind`, in the order they are applied.
pub fn rules(kind: AgentKind, preset: Preset) -> Vec<PresetRule> {
    match preset {
        Preset::ReadOnly => read_only_tools(kind)
            .iter()
            .map(|(pattern, why)| PresetRule {
                pattern,
                action: assent_tools::RuleAction::Allow,
                why,
            })
            .chain(read_only_commands(shell_of(kind)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_tools::{AgentPolicy, CallContext, RuleAction, ToolMode, ToolRule, ToolSpec};
    use serde_json::json;

    fn policy(kind: AgentKind) -> AgentPolicy {
        rules(kind, Preset::ReadOnly).into_iter().fold(
            AgentPolicy::new(["code"]),
            |policy, rule| {
                policy.with_rule(ToolRule::new(rule.pattern, rule.action).expect("a valid rule"))
            },
        )
    }

    fn route(policy: &AgentPolicy, tool: &str, args: serde_json::Value) -> RuleAction {
        let spec = ToolSpec::new(tool, "a coding agent's tool", ToolMode::Deferred, json!({}));
        policy.route_call(&spec, Some(CallContext::new(&args, "/w")))
    }

    #[test]
    fn every_preset_rule_is_valid_and_in_the_agents_own_names() {
        for kind in AgentKind::ALL {
            let rules = rules(kind, Preset::ReadOnly);
            assert!(!rules.is_empty(), "{kind}");
            for rule in rules {
                assert!(
                    ToolRule::new(rule.pattern, rule.action).is_ok(),
                    "{kind}: {}",
                    rule.pattern
                );
                if let Some(names) = kind.tool_names() {
                    let tool = rule.pattern.split('(').next().unwrap_or_default();
                    assert!(
                        names.contains(&tool),
                        "{kind}: {tool} is not a tool it sends"
                    );
                }
            }
        }
    }

    #[test]
    fn read_only_lets_plumbing_and_reading_run_and_asks_about_the_rest() {
        let claude = policy(AgentKind::ClaudeCode);
        for tool in [
            "ToolSearch",
            "Skill",
            "TodoWrite",
            "ListAgents",
            "Read",
            "Grep",
        ] {
            assert_eq!(route(&claude, tool, json!({})), RuleAction::Allow, "{tool}");
        }
        for command in [
            "git status",
            "git diff HEAD~1",
            "git log --oneline -5",
            "ls -la",
            "ls | ls",
        ] {
            assert_eq!(
                route(&claude, "Bash", json!({"command": command})),
                RuleAction::Allow,
                "{command}"
            );
        }
        for (tool, args) in [
            ("Write", json!({"file_path": "a", "content": "x"})),
            ("Bash", json!({"command": "rm -rf build"})),
            ("Bash", json!({"command": "git status && rm x"})),
            ("Bash", json!({"command": "git diff --output=/tmp/x"})),
            ("Bash", json!({"command": "ls > out.txt"})),
            ("Bash", json!({"command": "lsof -i"})),
            ("WebFetch", json!({"url": "https://example.com"})),
        ] {
            assert_eq!(
                route(&claude, tool, args.clone()),
                RuleAction::Ask,
                "{tool} {args}"
            );
        }
        let gemini = policy(AgentKind::Gemini);
        for tool in ["read_file", "glob"] {
            assert_eq!(route(&gemini, tool, json!({})), RuleAction::Allow, "{tool}");
        }
        assert_eq!(
            route(
                &gemini,
                "run_shell_command",
                json!({"command": "git log | head"})
            ),
            RuleAction::Ask,
            "head is not in the preset"
        );
        assert_eq!(route(&gemini, "write_file", json!({})), RuleAction::Ask);
    }
}
