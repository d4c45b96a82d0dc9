//! The one error type of the changeset crate.

/// The tool calls of a wake could not be read at all, or a reply or definition could
/// not be written in the dialect asked for. (Problems with a single call's tool or
/// arguments are not errors: they become a reply to the agent.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChangesetError {
    /// The document's text is not JSON.
    #[error("tool calls are not valid JSON: {0}")]
    NotJson(String),
    /// The document is in no known dialect.
    #[error(
        "tool calls must be OpenAI tool_calls or Responses output, Anthropic content blocks, a Gemini Content, a LangChain AIMessage, Vercel AI SDK tool-call parts or MCP tools/call requests, got {found}"
    )]
    NotAList {
        /// What was found instead.
        found: String,
    },
    /// The document does not have the shape of the dialect it was read in.
    #[error("not a {dialect} document: {found}")]
    NotDialect {
        /// The dialect's title.
        dialect: &'static str,
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
    /// An element of a type its dialect does not document: refused, never skipped,
    /// since it might have held a call.
    #[error("element #{index}: unknown element type {kind:?} (read as {dialect})")]
    UnknownElement {
        /// Position in the list (0-based).
        index: usize,
        /// The dialect it was read in, or `no known dialect`.
        dialect: &'static str,
        /// Its type (for Gemini parts, the field holding the data).
        kind: String,
    },
    /// Calls of two dialects in one document.
    #[error("element #{index} is a {dialect} call, but element #{first_index} is a {first} one")]
    MixedDialects {
        /// Position of the element of the second dialect.
        index: usize,
        /// The second dialect.
        dialect: &'static str,
        /// Position of the first element that showed a dialect.
        first_index: usize,
        /// The first dialect.
        first: &'static str,
    },
    /// A document from which no call could be read.
    #[error("no tool call in the document ({detail})")]
    NoCalls {
        /// What the document held instead.
        detail: String,
    },
    /// Two calls share an id, so their replies could not be told apart.
    #[error("tool call #{index}: id {id:?} is used twice")]
    DuplicateCallId {
        /// Position of the second use.
        index: usize,
        /// The id.
        id: String,
    },
    /// A `--format` or `--reply-format` names no dialect.
    #[error(
        "unknown format {0:?} (expected openai, responses, anthropic, gemini, langchain, vercel or mcp)"
    )]
    UnknownFormat(String),
    /// Tool definitions were asked for in a dialect that has no JSON form of them.
    #[error(
        "no tool definitions in the {0} format (expected openai, responses, anthropic, gemini or mcp)"
    )]
    NoDefinitionFormat(&'static str),
    /// The replies handed in do not answer the calls read, one by one.
    #[error("reply #{index} answers {found:?}, but call #{index} is {expected:?}")]
    ReplyMismatch {
        /// Position of the first reply that does not match.
        index: usize,
        /// The call's id.
        expected: String,
        /// The reply's id (empty when the reply is missing).
        found: String,
    },
    /// A call's id is a number that a `serde_json::Value` cannot hold as it was sent
    /// (past 64 bits, or written as `1.0` or `1e3`): its reply can only be written as
    /// JSON text, never as a `Value` that would name another id.
    #[error(
        "reply #{index}: id {id} cannot be written exactly in a JSON value; write the replies as JSON text"
    )]
    InexactId {
        /// Position of the call.
        index: usize,
        /// The id as it was sent.
        id: String,
    },
}
