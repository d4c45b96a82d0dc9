//! The coding agents whose hooks `assent hook` answers, what each one's dialect can
//! say, and the names of the tools each one sends, so a rule in another agent's naming
//! (`Bash(rm *)` for Gemini CLI, whose shell is `run_shell_command`) is refused instead
//! of kept and never matched: the kind is recorded when its first hook event arrives
//! ([`record`]), and every door that sets a rule checks against it
//! (`assent_confirm::agents`).

use crate::HookError;
use assent_store::Store;

/// The tools Claude Code sends to its hooks (MCP tools, `mcp__SERVER__TOOL`, aside).
const CLAUDE_CODE_TOOLS: &[&str] = &[
    "Agent",
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "Edit",
    "EnterPlanMode",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillBash",
    "KillShell",
    "LS",
    "ListAgents",
    "LSP",
    "ListMcpResourcesTool",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "ReadMcpResourceTool",
    "Skill",
    "SlashCommand",
    "Task",
    "TaskOutput",
    "TodoRead",
    "TodoWrite",
    "ToolSearch",
    "WebFetch",
    "WebSearch",
    "Write",
];

/// The tools Gemini CLI sends to its hooks (MCP tools aside).
const GEMINI_TOOLS: &[&str] = &[
    "activate_skill",
    "ask_user",
    "codebase_investigator",
    "delegate_to_agent",
    "exit_plan_mode",
    "enter_plan_mode",
    "glob",
    "google_web_search",
    "grep_search",
    "list_directory",
    "read_file",
    "read_many_files",
    "replace",
    "run_shell_command",
    "save_memory",
    "search_file_content",
    "smart_edit",
    "web_fetch",
    "write_file",
    "write_todos",
];

/// A coding agent with a pre-tool hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// Claude Code (`PreToolUse` / `PostToolUse`, command and `http` hooks).
    ClaudeCode,
    /// OpenAI's Codex CLI (`PreToolUse`, `PermissionRequest`): it cannot ask, and an
    /// unknown field in an answer makes it run the tool.
    Codex,
    /// Cursor (`preToolUse`, `beforeShellExecution`, `beforeMCPExecution`,
    /// `afterShellExecution`).
    Cursor,
    /// GitHub Copilot CLI (`preToolUse`, with `toolName` and `toolArgs`).
    Copilot,
    /// VS Code's agent hooks (Claude Code's shape).
    Vscode,
    /// Gemini CLI (`BeforeTool` / `AfterTool`): it cannot ask.
    Gemini,
}

impl AgentKind {
    /// Every kind, in the order the guide lists them.
    pub const ALL: [Self; 6] = [
        Self::ClaudeCode,
        Self::Codex,
        Self::Cursor,
        Self::Copilot,
        Self::Vscode,
        Self::Gemini,
    ];

    /// The name on the command line and in `/api/hooks/{kind}`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Cursor => "cursor",
            Self::Copilot => "copilot",
            Self::Vscode => "vscode",
            Self::Gemini => "gemini",
        }
    }

    /// The names of the tools this kind of agent sends to its hook (MCP tools aside),
    /// when known: a rule of its agent must be able to match one of them. `None` for
    /// a kind whose names are not listed here (every rule is accepted, as before).
    pub const fn tool_names(self) -> Option<&'static [&'static str]> {
        match self {
            Self::ClaudeCode => Some(CLAUDE_CODE_TOOLS),
            Self::Gemini => Some(GEMINI_TOOLS),
            Self::Codex | Self::Cursor | Self::Copilot | Self::Vscode => None,
        }
    }

    /// Whether the agent can hand a call to its own prompt (`ask`); the others are
    /// answered `deny` instead, never `allow`.
    pub const fn can_ask(self) -> bool {
        !matches!(self, Self::Codex | Self::Gemini)
    }
}

impl std::fmt::Display for AgentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AgentKind {
    type Err = HookError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| HookError::UnknownKind(s.to_owned()))
    }
}

/// Records that agent `agent`'s hook answers a coding agent of `kind`, with the tool
/// names it sends ([`AgentKind::tool_names`]), when that is not recorded yet: one read
/// per event, a write only the first time (or when the names changed with a release).
pub(crate) async fn record(store: &Store, agent: &str, kind: AgentKind) -> Result<(), HookError> {
    let Some(names) = kind.tool_names() else {
        return Ok(());
    };
    {
        let mut conn = store.read_connection().await?;
        if let Some((known, known_names)) =
            assent_confirm::agents::kind_of(&mut conn, agent).await?
            && known == kind.as_str()
            && known_names.iter().eq(names.iter())
        {
            return Ok(());
        }
    }
    let mut tx = store.begin_write().await?;
    let now = time::OffsetDateTime::now_utc();
    assent_confirm::agents::record_kind(tx.connection(), agent, kind.as_str(), names, now).await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_name_their_tools_apart() {
        let claude = AgentKind::ClaudeCode.tool_names().expect("listed");
        let gemini = AgentKind::Gemini.tool_names().expect("listed");
        assert!(claude.contains(&"Bash") && !gemini.contains(&"Bash"));
        assert!(gemini.contains(&"run_shell_command") && !claude.contains(&"run_shell_command"));
    }
}
