//! A scripted completion model for rig: no network, no API key. Each model call takes
//! the next step of its script (call a tool, or answer quoting the last tool result it
//! was given) and records the tool results the agent sent it, so a test sees exactly
//! what the model read.

use futures_util::stream;
use rig_core::completion::{CompletionRequest, Message};
use rig_core::driver::{DynModel, Exchange, Model, Opened, Opening, Transport};
use rig_core::message::{ToolResultContent, UserContent};
use rig_core::operation::Completion;
use rig_core::test_utils::{MockFrame, MockScript, MockStreamEvent};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// One model turn.
#[derive(Debug, Clone)]
pub enum Step {
    /// Call `tool` with `args` under call id `id`.
    Call {
        /// The call's id.
        id: &'static str,
        /// The tool.
        tool: &'static str,
        /// Its arguments.
        args: Value,
    },
    /// Answer in text: this opening, then the last tool result the model read.
    Answer(&'static str),
}

/// A tool result as the model read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The tool.
    pub tool: String,
    /// The result's text.
    pub text: String,
}

/// The scripted model (clones share the script and what was read).
#[derive(Clone, Default)]
pub struct Scripted {
    steps: Arc<Mutex<VecDeque<Step>>>,
    read: Arc<Mutex<Vec<Read>>>,
}

impl Scripted {
    /// A model that plays `steps` in order.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: Arc::new(Mutex::new(steps.into_iter().collect())),
            read: Arc::default(),
        }
    }

    /// The model, for `AgentBuilder::new`.
    pub fn model(&self) -> DynModel<Completion> {
        Model::new(MockScript::new("scripted"), self.clone()).erase()
    }

    /// The tool results the model read, in order.
    pub fn read(&self) -> Vec<Read> {
        self.read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The result of `tool` the model read last.
    pub fn read_of(&self, tool: &str) -> Option<Read> {
        self.read().into_iter().rev().find(|read| read.tool == tool)
    }
}

impl Transport<MockScript> for Scripted {
    #[expect(
        clippy::result_large_err,
        reason = "rig's transport yields `Result<MockFrame, ProviderError>` frames"
    )]
    fn send(&self, request: CompletionRequest, _exchange: Exchange) -> Opening<MockFrame> {
        let mut last = String::new();
        if let Some(Message::User { content }) = request.chat_history.last() {
            let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
            for block in content {
                if let UserContent::ToolResult(result) = block {
                    let text: Vec<&str> = result
                        .content
                        .iter()
                        .filter_map(|part| match part {
                            ToolResultContent::Text(text) => Some(text.text.as_str()),
                            _ => None,
                        })
                        .collect();
                    last = text.join("\n");
                    read.push(Read {
                        tool: result.name.to_string(),
                        text: last.clone(),
                    });
                }
            }
        }
        let step = self
            .steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let said = match step {
            Some(Step::Call { id, tool, args }) => MockStreamEvent::tool_call(id, tool, args),
            Some(Step::Answer(opening)) => MockStreamEvent::text(format!("{opening} {last}")),
            None => MockStreamEvent::text("The script has ended."),
        };
        let events = [said, MockStreamEvent::final_response_with_default_usage()];
        Opening::ready(Opened::new(stream::iter(
            events.map(|event| Ok(MockFrame::Event(event))),
        )))
    }
}
