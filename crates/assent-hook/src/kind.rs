//! The coding agents whose hooks `assent hook` answers, and what each one's dialect can
//! say.

use crate::HookError;

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
