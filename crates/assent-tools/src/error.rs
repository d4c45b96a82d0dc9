//! The one error type of the tools crate.

/// A tool could not be registered, found or called with the given arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsError {
    /// No tool of that name is registered.
    #[error("unknown tool {name:?}")]
    UnknownTool {
        /// The name asked for.
        name: String,
    },
    /// A tool of that name is already registered.
    #[error("tool {name:?} is registered twice")]
    DuplicateTool {
        /// The name.
        name: String,
    },
    /// The tool's own schema is not a valid JSON Schema.
    #[error("tool {name:?} has an invalid argument schema: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What the schema compiler said.
        message: String,
    },
    /// A tool's target in its arguments ([`crate::ToolSpec::target_from`]) has no kind
    /// or a pointer that does not start with `/`.
    #[error(
        "tool {name:?} takes its target from its arguments, but kind {kind:?} at pointer {pointer:?} cannot name one (a non-empty kind and a JSON pointer such as \"/order_id\")"
    )]
    InvalidTargetFrom {
        /// The tool.
        name: String,
        /// The target kind given.
        kind: String,
        /// The pointer given.
        pointer: String,
    },
    /// A batch tool explodes into a tool that takes its target from its arguments:
    /// its elements could name several targets, and a batch is queued as one set.
    #[error(
        "batch tool {batch:?} explodes into {singular:?}, which takes its target from its arguments; register the singular tool alone"
    )]
    BatchOfRoutedTool {
        /// The batch tool.
        batch: String,
        /// The singular tool.
        singular: String,
    },
    /// A batch tool names a singular tool that is not registered (register it first).
    #[error("batch tool {batch:?} explodes into {singular:?}, which is not registered")]
    MissingSingularTool {
        /// The batch tool.
        batch: String,
        /// The missing singular tool.
        singular: String,
    },
    /// The arguments do not satisfy the tool's schema.
    #[error("invalid arguments for {tool}: {}", problems.join("; "))]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// One line per violation, each naming the argument path.
        problems: Vec<String>,
    },
    /// A policy pattern is not usable.
    #[error("invalid tool pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// A handler ran and failed (or panicked); nothing it wrote is kept.
    #[error("{tool} failed: {message}")]
    HandlerFailed {
        /// The tool.
        tool: String,
        /// What went wrong.
        message: String,
    },
}
