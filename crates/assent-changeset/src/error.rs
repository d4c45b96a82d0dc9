//! The one error type of the changeset crate.

/// The tool calls of a wake could not be read at all. (Problems with a single call are
/// not errors: they become a reply to the agent.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangesetError {
    /// The document is not a list of tool calls in a known dialect.
    #[error(
        "tool calls must be a JSON array of OpenAI tool_calls or Anthropic tool_use blocks, got {found}"
    )]
    NotAList {
        /// What was found instead.
        found: String,
    },
    /// One entry of the list is malformed.
    #[error("tool call #{index}: {reason}")]
    MalformedCall {
        /// Position in the list (0-based).
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Two calls share an id, so their replies could not be told apart.
    #[error("tool call #{index}: id {id:?} is used twice")]
    DuplicateCallId {
        /// Position of the second use.
        index: usize,
        /// The id.
        id: String,
    },
}
