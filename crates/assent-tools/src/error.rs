//! The one error type of the tools crate.

/// A tool could not be registered, found or called with the given arguments.
#[derive(Debug, thiserror::Error)]
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
    /// A policy file (`assent policy plan|apply`) that cannot be read: what is wrong,
    /// at which line and column (1-based).
    #[error("invalid policy file at line {line}, column {column}: {message}")]
    InvalidPolicyFile {
        /// The line of the first thing wrong.
        line: usize,
        /// Its column, in characters.
        column: usize,
        /// What is wrong there.
        message: String,
    },
    /// The arguments do not satisfy the tool's schema.
    #[error("invalid arguments for {tool}: {}", ArgProblem::join(problems))]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// One per violation, each naming the argument path.
        problems: Vec<ArgProblem>,
    },
    /// A policy pattern is not usable.
    #[error("invalid tool pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
    /// A rule's condition over the history is not usable.
    #[error("invalid condition: {reason}")]
    InvalidCondition {
        /// Why.
        reason: String,
    },
    /// A handler ran and failed (or panicked); nothing it wrote is kept. Built with
    /// [`ToolsError::handler_failed`].
    #[error("{tool} failed: {message}")]
    #[non_exhaustive]
    HandlerFailed {
        /// The tool.
        tool: String,
        /// What went wrong (the handler's error as text).
        message: String,
        /// The handler's own error, as it returned it: a service tells its business
        /// refusal from a database failure with `downcast_ref`.
        source: HandlerError,
    },
}

/// One reason arguments were refused: which argument (a JSON pointer), and what is
/// wrong with it. Reads `{path}: {message}`, or the message alone when the problem is
/// not about one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArgProblem {
    /// The argument's JSON pointer (`/title`); empty for the arguments as a whole or a
    /// problem with no argument of its own (the schema cannot be read).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ArgProblem {
    /// A problem with the argument at `path` (a JSON pointer, empty for the whole).
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A problem that names no argument.
    pub fn general(message: impl Into<String>) -> Self {
        Self::new("", message)
    }

    /// `problems` as one line, `; ` between them.
    pub fn join(problems: &[ArgProblem]) -> String {
        problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl std::fmt::Display for ArgProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// The error a handler returns, as it returned it (any error type, boxed).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

impl ToolsError {
    /// `tool`'s handler failed with `error` (its own error type, or a text): the
    /// message is its text, and [`std::error::Error::source`] gives it back.
    pub fn handler_failed(tool: impl Into<String>, error: impl Into<HandlerError>) -> Self {
        let source = error.into();
        Self::HandlerFailed {
            tool: tool.into(),
            message: source.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("invoice 7 is already paid")]
    struct AlreadyPaid;

    #[test]
    fn a_handlers_own_error_stays_its_source_and_its_text_the_message() {
        let error = ToolsError::handler_failed("refund", AlreadyPaid);
        assert_eq!(
            error.to_string(),
            "refund failed: invoice 7 is already paid"
        );
        let source = std::error::Error::source(&error).expect("a source");
        assert!(source.downcast_ref::<AlreadyPaid>().is_some());
        let text = ToolsError::handler_failed("refund", "no such invoice");
        assert_eq!(text.to_string(), "refund failed: no such invoice");
    }

    #[test]
    fn argument_problems_read_as_one_line_per_path() {
        let problems = [
            ArgProblem::new("/title", "3 is not of type \"string\""),
            ArgProblem::general("the schema cannot be read"),
        ];
        assert_eq!(
            ArgProblem::join(&problems),
            "/title: 3 is not of type \"string\"; the schema cannot be read"
        );
    }
}
