//! The tool catalog: specs, schema validation, summaries and model-facing exports.

use crate::{ArgProblem, ToolsError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt;

/// How a call to the tool is routed when no policy rule says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolMode {
    /// Low risk: executed at once (through the audited executor).
    Immediate,
    /// Mutating: queued in a change set for a person to confirm.
    Deferred,
    /// The agent's own output (report, observations): handed back to the host.
    Local,
    /// Queued for a person whatever the agent's rules allow (a deny rule still
    /// refuses it): for a tool whose definition changed since a person accepted it,
    /// so an "allow" given to the old definition does not carry over to the new one.
    Review,
}

/// A batch tool is exploded into one item per element of `array_key`, each running
/// `singular_tool`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// The argument holding the array, e.g. `items`.
    pub array_key: String,
    /// The tool each element becomes, e.g. `add_checklist_item`.
    pub singular_tool: String,
    /// When set, an element that is not an object becomes `{element_key: element}`
    /// (e.g. a label string becomes `{"label": "bug"}`); object elements are used as
    /// they are.
    pub element_key: Option<String>,
}

/// Where a tool's call names the entity it acts on: a target of `kind` whose id is
/// the string (or number) at JSON pointer `pointer` in the call's arguments
/// ([`ToolSpec::target_from`]). A wake routes each such call to that target, whatever
/// the wake was about; an edit may not name another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFrom {
    /// The target's kind, e.g. `order`.
    pub kind: String,
    /// The JSON pointer (RFC 6901) to its id in the arguments, e.g. `/order_id`.
    pub pointer: String,
}

impl TargetFrom {
    /// The target `args` name: the string at the pointer, or the number there
    /// written out; `None` when it is missing, empty or of another type.
    ///
    /// ```
    /// use assent_tools::TargetFrom;
    /// use serde_json::json;
    ///
    /// let from = TargetFrom { kind: "order".into(), pointer: "/order_id".into() };
    /// let target = from.target_in(&json!({"order_id": "o-7", "cents": 500})).unwrap();
    /// assert_eq!((target.kind.as_str(), target.id.as_str()), ("order", "o-7"));
    /// assert_eq!(from.target_in(&json!({"order_id": 7})).unwrap().id, "7");
    /// assert!(from.target_in(&json!({"order_id": ["o-7"]})).is_none());
    /// assert!(from.target_in(&json!({"cents": 500})).is_none());
    /// ```
    pub fn target_in(&self, args: &Value) -> Option<assent_domain::Target> {
        let id = match args.pointer(&self.pointer)? {
            Value::String(id) if !id.trim().is_empty() => id.clone(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        Some(assent_domain::Target::new(self.kind.clone(), id))
    }
}

/// What a summary may look up about the current state, e.g. a checklist item's title
/// when the proposal only names its id.
pub trait SummaryContext {
    /// The title of an entity (such as a checklist item) by id, if known.
    fn title_of(&self, entity_id: &str) -> Option<String>;
}

/// Makes the text a person reads for one call of the tool.
pub type SummaryFn = fn(args: &Value, context: Option<&dyn SummaryContext>) -> String;

/// How to reverse an applied call: from its (effective) arguments, the value it
/// replaced (`before`, as recorded when it was applied) and its result text, the call
/// that puts things back, `(tool, args)`; `None` when what was recorded does not allow
/// it (nothing was there before, say). `assent undo` proposes that call for review.
pub type CompensationFn =
    fn(args: &Value, before: Option<&Value>, result: &str) -> Option<(String, Value)>;

/// One tool: its contract with the model and how Assent routes it.
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Unique name, as the model calls it.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON Schema of its arguments object.
    pub args_schema: Value,
    /// Default routing.
    pub mode: ToolMode,
    /// Present for batch tools.
    pub batch: Option<BatchSpec>,
    /// The human summary of a call; `None` falls back to [`titled_summary`] for a tool
    /// with a [`title`](Self::title), else to `tool(arg keys)`.
    pub summary: Option<SummaryFn>,
    /// How a person names the tool, when its host gives it a name for people (an MCP
    /// tool's `title`): data of the spec, so a summary made in any process, at any
    /// time (a wake, an edit, an undo), names the tool the same way.
    pub title: Option<String>,
    /// How to reverse an applied call (see [`CompensationFn`]); `None`: it cannot be
    /// undone through Assent.
    pub compensation: Option<CompensationFn>,
    /// Where a call names its target in its arguments ([`ToolSpec::target_from`]);
    /// `None`: it acts on the wake's target.
    pub target_from: Option<TargetFrom>,
}

impl fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl ToolSpec {
    /// A singular tool routed by `mode`, with the fallback summary (`tool(arg keys)`).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        mode: ToolMode,
        args_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            args_schema,
            mode,
            batch: None,
            summary: None,
            title: None,
            compensation: None,
            target_from: None,
        }
    }

    /// The same tool, acting on the target of `kind` whose id its arguments hold at
    /// JSON pointer `pointer` (e.g. `("order", "/order_id")`): a wake queues each call
    /// for that target, in a change set of its own per target; a call whose arguments
    /// hold no id there (missing, empty, not a string or number) is refused to the
    /// agent, and a person's edit may not move it to another target. Registering a
    /// pointer that does not start with `/` is refused.
    ///
    /// ```
    /// use assent_tools::{ToolMode, ToolSpec};
    /// use serde_json::json;
    ///
    /// let refund = ToolSpec::new("issue_refund", "Refund an order.", ToolMode::Deferred,
    ///     json!({"type": "object", "required": ["order_id"]}))
    ///     .target_from("order", "/order_id");
    /// let target = refund.target_in(&json!({"order_id": "o-7"})).unwrap();
    /// assert_eq!(target.to_string(), "order o-7");
    /// ```
    #[must_use]
    pub fn target_from(mut self, kind: impl Into<String>, pointer: impl Into<String>) -> Self {
        self.target_from = Some(TargetFrom {
            kind: kind.into(),
            pointer: pointer.into(),
        });
        self
    }

    /// The target a call with `args` acts on when the tool takes it from its
    /// arguments ([`ToolSpec::target_from`]); `None` for a tool that does not, or
    /// arguments that name none.
    pub fn target_in(&self, args: &Value) -> Option<assent_domain::Target> {
        self.target_from.as_ref()?.target_in(args)
    }

    /// The same tool, named `title` for a person and, without a summary of its own,
    /// summarised by [`titled_summary`].
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The same tool, summarised for a person by `summary`.
    #[must_use]
    pub fn with_summary(mut self, summary: SummaryFn) -> Self {
        self.summary = Some(summary);
        self
    }

    /// This tool, reversible by `compensation`.
    #[must_use]
    pub fn with_compensation(mut self, compensation: CompensationFn) -> Self {
        self.compensation = Some(compensation);
        self
    }

    /// The call that reverses an applied call of this tool, if it declares one and what
    /// was recorded allows it.
    pub fn compensate(
        &self,
        args: &Value,
        before: Option<&Value>,
        result: &str,
    ) -> Option<(String, Value)> {
        self.compensation?(args, before, result)
    }

    /// The summary of a call of this tool.
    pub fn summarize(&self, args: &Value, context: Option<&dyn SummaryContext>) -> String {
        match (self.summary, &self.title) {
            (Some(summary), _) => summary(args, context),
            (None, Some(title)) => titled_summary(title, args),
            (None, None) => fallback_summary(&self.name, args),
        }
    }
}

/// The longest argument value a [`titled_summary`] shows before cutting it.
pub const SUMMARY_VALUE_CHARS: usize = 60;

/// `Write File(path: "/tmp/a", content: "hello")`: the summary of a titled tool
/// nobody wrote one for (an MCP server's), its title and its arguments, each on one
/// line and a long one cut in the middle, so that where a path ends and what was
/// appended to a content stay in sight.
pub fn titled_summary(title: &str, args: &Value) -> String {
    let Value::Object(map) = args else {
        return format!("{title}()");
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(key, value)| {
            let text = value.to_string();
            let shown = assent_domain::head_and_tail(&text, SUMMARY_VALUE_CHARS);
            format!(
                "{}: {}",
                assent_domain::one_line(key),
                assent_domain::one_line(&shown)
            )
        })
        .collect();
    format!("{title}({})", parts.join(", "))
}

/// `tool(arg keys)`: the summary of a tool nobody wrote one for.
pub fn fallback_summary(tool_name: &str, args: &Value) -> String {
    let keys = match args {
        Value::Object(map) => {
            let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
            keys.sort_unstable();
            keys.join(", ")
        }
        _ => String::new(),
    };
    format!("{tool_name}({keys})")
}

struct RegisteredTool {
    spec: ToolSpec,
    validator: jsonschema::Validator,
}

/// The catalog of tools an agent may call. Schemas are compiled once, at registration.
#[derive(Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. Its schema must compile, its name must be new, and a batch tool's
    /// singular tool must already be registered.
    pub fn register(&mut self, spec: ToolSpec) -> Result<(), ToolsError> {
        if self.tools.contains_key(&spec.name) {
            return Err(ToolsError::DuplicateTool { name: spec.name });
        }
        if let Some(from) = &spec.target_from
            && (!from.pointer.starts_with('/') || from.kind.trim().is_empty())
        {
            return Err(ToolsError::InvalidTargetFrom {
                name: spec.name.clone(),
                kind: from.kind.clone(),
                pointer: from.pointer.clone(),
            });
        }
        if let Some(batch) = &spec.batch
            && !self.tools.contains_key(&batch.singular_tool)
        {
            return Err(ToolsError::MissingSingularTool {
                batch: spec.name.clone(),
                singular: batch.singular_tool.clone(),
            });
        }
        // A batch is queued as one set about one target: its elements cannot each
        // name their own.
        if let Some(batch) = &spec.batch
            && self
                .tools
                .get(&batch.singular_tool)
                .is_some_and(|singular| singular.spec.target_from.is_some())
        {
            return Err(ToolsError::BatchOfRoutedTool {
                batch: spec.name.clone(),
                singular: batch.singular_tool.clone(),
            });
        }
        // Formats (`date`, ...) are assertions here: a due date of 2026-02-30 is refused
        // when proposed, not when a person confirms it.
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&spec.args_schema)
            .map_err(|e| ToolsError::InvalidSchema {
                name: spec.name.clone(),
                message: e.to_string(),
            })?;
        self.tools
            .insert(spec.name.clone(), RegisteredTool { spec, validator });
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(|t| &t.spec)
    }

    /// The tool named `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<&ToolSpec, ToolsError> {
        self.get(name).ok_or_else(|| ToolsError::UnknownTool {
            name: name.to_owned(),
        })
    }

    /// All tools, by name.
    pub fn iter(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|t| &t.spec)
    }

    /// Checks `args` against the tool's schema; every violation is reported with its
    /// path.
    pub fn validate_args(&self, name: &str, args: &Value) -> Result<(), ToolsError> {
        let tool = self
            .tools
            .get(name)
            .ok_or_else(|| ToolsError::UnknownTool {
                name: name.to_owned(),
            })?;
        let problems: Vec<ArgProblem> = tool
            .validator
            .iter_errors(args)
            .map(|e| ArgProblem::new(e.instance_path().to_string(), e.to_string()))
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ToolsError::InvalidArgs {
                tool: name.to_owned(),
                problems,
            })
        }
    }

    /// The summary of a call; unknown tools fall back to `tool(arg keys)`.
    pub fn summarize(
        &self,
        name: &str,
        args: &Value,
        context: Option<&dyn SummaryContext>,
    ) -> String {
        match self.get(name) {
            Some(spec) => spec.summarize(args, context),
            None => fallback_summary(name, args),
        }
    }

    /// The tools as OpenAI chat-completions `tools` entries.
    pub fn openai_tools(&self) -> Value {
        Value::Array(
            self.iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.args_schema,
                        }
                    })
                })
                .collect(),
        )
    }

    /// The tools as Anthropic messages-API `tools` entries.
    pub fn anthropic_tools(&self) -> Value {
        Value::Array(
            self.iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.args_schema,
                    })
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_titled_tool_is_summarised_by_its_title_and_arguments() {
        let spec =
            ToolSpec::new("write_file", "", ToolMode::Deferred, json!({})).with_title("Write File");
        let args = json!({"path": "/tmp/a", "content": "x".repeat(100)});
        let content =
            assent_domain::head_and_tail(&args["content"].to_string(), SUMMARY_VALUE_CHARS)
                .into_owned();
        assert_eq!(
            spec.summarize(&args, None),
            format!("Write File(content: {content}, path: \"/tmp/a\")")
        );
        assert!(content.ends_with("xx\""), "{content}");
        let appended = json!({"path": format!("/home/u/{}/.ssh/authorized_keys", "d".repeat(200)),
            "content": format!("{}\nssh-ed25519 AAAA attacker@evil", "k".repeat(300))});
        let text = spec.summarize(&appended, None);
        assert!(text.contains("attacker@evil\""), "{text}");
        assert!(text.contains(".ssh/authorized_keys\""), "{text}");
        assert_eq!(spec.summarize(&json!(3), None), "Write File()");
        let untitled = ToolSpec::new("write_file", "", ToolMode::Deferred, json!({}));
        assert_eq!(untitled.summarize(&args, None), "write_file(content, path)");
    }

    fn title_tool() -> ToolSpec {
        ToolSpec {
            name: "set_title".into(),
            description: "Set the title".into(),
            args_schema: json!({
                "type": "object",
                "properties": {"title": {"type": "string", "minLength": 1}},
                "required": ["title"],
                "additionalProperties": false
            }),
            mode: ToolMode::Deferred,
            batch: None,
            summary: Some(|args, _| format!("Set title to {}", args["title"])),
            title: None,
            compensation: None,
            target_from: None,
        }
    }

    #[test]
    fn validates_with_paths() {
        let mut r = ToolRegistry::new();
        r.register(title_tool()).expect("registers");
        assert!(r.validate_args("set_title", &json!({"title": "x"})).is_ok());
        let err = r
            .validate_args("set_title", &json!({"title": 3}))
            .unwrap_err();
        let ToolsError::InvalidArgs { problems, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(problems[0].path, "/title", "{problems:?}");
        assert!(r.validate_args("set_title", &json!({})).is_err());
        assert!(
            r.validate_args("set_title", &json!({"title": "x", "extra": 1}))
                .is_err()
        );
        assert!(matches!(
            r.validate_args("nope", &json!({})),
            Err(ToolsError::UnknownTool { .. })
        ));
    }

    #[test]
    fn registration_errors() {
        let mut r = ToolRegistry::new();
        r.register(title_tool()).expect("registers");
        assert!(matches!(
            r.register(title_tool()),
            Err(ToolsError::DuplicateTool { .. })
        ));
        let mut bad = title_tool();
        bad.name = "bad".into();
        bad.args_schema = json!({"type": "no-such-type"});
        assert!(matches!(
            r.register(bad),
            Err(ToolsError::InvalidSchema { .. })
        ));
        let mut batch = title_tool();
        batch.name = "batch".into();
        batch.batch = Some(BatchSpec {
            array_key: "items".into(),
            singular_tool: "missing".into(),
            element_key: None,
        });
        assert!(matches!(
            r.register(batch),
            Err(ToolsError::MissingSingularTool { .. })
        ));
    }

    #[test]
    fn summaries_and_fallback() {
        let mut r = ToolRegistry::new();
        r.register(title_tool()).expect("registers");
        assert_eq!(
            r.summarize("set_title", &json!({"title": "a"}), None),
            "Set title to \"a\""
        );
        assert_eq!(
            r.summarize("frob", &json!({"b": 1, "a": 2}), None),
            "frob(a, b)"
        );
    }

    #[test]
    fn exports_both_dialects() {
        let mut r = ToolRegistry::new();
        r.register(title_tool()).expect("registers");
        let openai = r.openai_tools();
        assert_eq!(openai[0]["type"], "function");
        assert_eq!(openai[0]["function"]["name"], "set_title");
        assert_eq!(openai[0]["function"]["parameters"]["required"][0], "title");
        let anthropic = r.anthropic_tools();
        assert_eq!(anthropic[0]["name"], "set_title");
        assert_eq!(anthropic[0]["input_schema"]["type"], "object");
    }

    #[test]
    fn a_target_in_the_arguments_is_registered_only_when_it_can_name_one() {
        let schema = json!({"type": "object"});
        let spec = |kind: &str, pointer: &str| {
            ToolSpec::new("refund", "Refund.", ToolMode::Deferred, schema.clone())
                .target_from(kind, pointer)
        };
        for (kind, pointer) in [("order", "order_id"), (" ", "/order_id"), ("order", "")] {
            let refused = ToolRegistry::new().register(spec(kind, pointer));
            assert!(
                matches!(refused, Err(ToolsError::InvalidTargetFrom { .. })),
                "{kind:?} {pointer:?}: {refused:?}"
            );
        }
        let mut registry = ToolRegistry::new();
        registry
            .register(spec("order", "/order_id"))
            .expect("registers");
        let mut batch = ToolSpec::new("refunds", "Refunds.", ToolMode::Deferred, schema.clone());
        batch.batch = Some(BatchSpec {
            array_key: "items".into(),
            singular_tool: "refund".into(),
            element_key: None,
        });
        let refused = registry.register(batch);
        assert!(
            matches!(refused, Err(ToolsError::BatchOfRoutedTool { .. })),
            "{refused:?}"
        );
    }
}
