//! `assent review --server URL`: the reviewer's door to a remote `assent serve`. The
//! waiting sets come from `GET /api/change-sets`, what changes from the server's event
//! stream (`GET /api/events`, server-sent events: no polling), and every decision goes
//! through the server's decision routes with the reviewer token, so the server's
//! confirmation service decides exactly as for the page. The token travels only in the
//! `Authorization` header and is never printed.

use crate::CliError;
use assent_confirm::records::{Approval, Quorum, Revision};
use assent_domain::{ChangeItem, ChangeItemStatus, ChangeSet, ChangeSetStatus, OffsetDateTime};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::time::Duration;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

/// How long reaching the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one API request may take (the event stream has no such bound: it stays
/// open while the person reviews).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote `assent serve` as a reviewer uses it.
pub struct ReviewServer {
    base: Url,
    token: String,
    client: reqwest::Client,
    /// Its event stream, once opened.
    events: Option<EventStream>,
}

/// An open set as the server shows it, with what the reviewer's screen needs.
pub struct RemoteSet {
    pub set: ChangeSet,
    pub quorum: Quorum,
    pub held: Vec<usize>,
    pub waits_until: Option<OffsetDateTime>,
    /// Who made each item's last decision, when known.
    pub decided_by: Vec<Option<String>>,
}

/// What a decision route answered: the line to show, or why it was refused.
pub type Answer = Result<Value, String>;

impl ReviewServer {
    /// Checks the URL, then the token against `GET /api/session` (a reviewer's or an
    /// admin's): returns the server and the identity its decisions are recorded under.
    pub async fn connect(url: &str, token: &str) -> Result<(Self, String), CliError> {
        let base = parse_url(url)?;
        let token = token.trim().to_owned();
        if token.is_empty() {
            return Err(CliError::Usage(
                "review --server needs a reviewer token: --token TOKEN or ASSENT_TOKEN".to_owned(),
            ));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // Decisions go to the URL the person gave, never to where a server points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| CliError::failed(format!("cannot start the HTTP client: {e}")))?;
        let server = Self {
            base,
            token,
            client,
            events: None,
        };
        let session = server
            .call(Method::GET, "api/session", None)
            .await?
            .map_err(|problem| {
                CliError::failed(format!("server {} refused: {problem}", server.base))
            })?;
        let role = session["role"].as_str().unwrap_or_default();
        if !matches!(role, "reviewer" | "admin") {
            return Err(CliError::failed(format!(
                "server {} took the token as {role:?}; reviewing needs a reviewer or admin token",
                server.base
            )));
        }
        let identity = session["identity"]
            .as_str()
            .filter(|identity| !identity.is_empty())
            .unwrap_or(role)
            .to_owned();
        Ok((server, identity))
    }

    /// The base URL, for messages.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// One request; `Ok(Err(problem))` when the server answered with an error (its
    /// problem's detail), `Err` when it could not be reached or answered nonsense.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Result<Value, String>, CliError> {
        let url = self.endpoint(path)?;
        self.call_url(method, url, body).await
    }

    fn endpoint(&self, path: &str) -> Result<Url, CliError> {
        self.base
            .join(path)
            .map_err(|e| CliError::failed(format!("invalid server URL {}: {e}", self.base)))
    }

    async fn call_url(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Result<Value, String>, CliError> {
        let request = |url: Url| {
            let request = self
                .client
                .request(method.clone(), url)
                .bearer_auth(&self.token)
                .timeout(REQUEST_TIMEOUT);
            match &body {
                Some(body) => request.json(body),
                None => request,
            }
        };
        let response = match request(url.clone()).send().await {
            // A read is asked again once when the connection it went out on closed
            // under it (an idle kept-alive connection the server had just dropped):
            // asking again changes nothing. A decision is never sent twice unasked.
            Err(error) if method == Method::GET && !error.is_timeout() => {
                tracing::debug!(%error, %url, "read failed on its connection; asking once more");
                request(url).send().await
            }
            sent => sent,
        }
        .map_err(|e| {
            CliError::Failed(
                anyhow::Error::new(e).context(format!("cannot reach server {}", self.base)),
            )
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            CliError::Failed(
                anyhow::Error::new(e)
                    .context(format!("cannot read the answer of server {}", self.base)),
            )
        })?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(Ok(value));
        }
        if status.is_redirection() {
            return Err(CliError::failed(format!(
                "server {} answered {status}, a redirect; point --server at `assent serve` itself",
                self.base
            )));
        }
        let detail = value["detail"]
            .as_str()
            .or_else(|| value["title"].as_str())
            .map(str::to_owned)
            .unwrap_or_else(|| {
                if status == StatusCode::UNAUTHORIZED {
                    "the token is not valid here".to_owned()
                } else {
                    format!("it answered {status}")
                }
            });
        Ok(Err(format!("{detail} ({})", status.as_u16())))
    }

    /// The open sets (of `agent`), oldest first.
    pub async fn open_sets(&self, agent: Option<&str>) -> Result<Vec<RemoteSet>, CliError> {
        let mut url = self.endpoint("api/change-sets")?;
        if let Some(agent) = agent {
            url.query_pairs_mut().append_pair("agentId", agent);
        }
        let listed = self
            .call_url(Method::GET, url, None)
            .await?
            .map_err(|problem| CliError::failed(format!("server {}: {problem}", self.base)))?;
        let mut sets = listed
            .as_array()
            .ok_or_else(|| self.nonsense("a list of change sets"))?
            .iter()
            .map(|view| self.remote_set(view))
            .collect::<Result<Vec<_>, _>>()?;
        sets.reverse();
        Ok(sets)
    }

    /// One set as the server shows it now; `None` when it is gone.
    pub async fn set(&self, id: Uuid) -> Result<Option<RemoteSet>, CliError> {
        match self
            .call(Method::GET, &format!("api/change-sets/{id}"), None)
            .await?
        {
            Ok(view) => self.remote_set(&view).map(Some),
            Err(problem) if problem.ends_with("(404)") => Ok(None),
            Err(problem) => Err(CliError::failed(format!("server {}: {problem}", self.base))),
        }
    }

    fn nonsense(&self, expected: &str) -> CliError {
        CliError::failed(format!(
            "server {} did not answer with {expected}; is it `assent serve`?",
            self.base
        ))
    }

    /// A set view of the API (`GET /api/change-sets/{id}`) as the reviewer's screen
    /// reads it: the proposal, its quorum (with the arguments a person's edit put in),
    /// the held items and how long its agent waits.
    fn remote_set(&self, view: &Value) -> Result<RemoteSet, CliError> {
        let shown: SetShown = serde_json::from_value(view.clone())
            .map_err(|e| self.nonsense(&format!("a change set ({e})")))?;
        let mut items = Vec::with_capacity(shown.items.len());
        let mut quorum = Quorum { items: Vec::new() };
        let mut held = Vec::new();
        let mut decided_by = Vec::new();
        for (index, item) in shown.items.into_iter().enumerate() {
            let proposed = item
                .proposed_args
                .clone()
                .unwrap_or_else(|| item.args.clone());
            let mut change = ChangeItem::new(item.tool_name, proposed, item.human_summary)
                .with_before(item.before);
            change.status = item.status;
            change.stale_detail = item.stale_detail;
            change.revision = item.revision;
            change.approvals_needed = item.approvals_needed;
            if let Some(needed) = item.approvals_needed {
                let approvals = item
                    .approvals
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|a| {
                        Some(Approval {
                            by: a["by"].as_str()?.to_owned(),
                            at: OffsetDateTime::parse(a["at"].as_str()?, &Rfc3339).ok()?,
                        })
                    })
                    .collect();
                quorum.items.push((
                    index,
                    needed,
                    Revision {
                        number: i64::from(item.revision),
                        args: item.proposed_args.is_some().then(|| item.args.clone()),
                        approvals,
                        edited_by: item.edited_by.clone(),
                    },
                ));
            }
            if item
                .execution
                .as_ref()
                .is_some_and(|run| run["status"] == "scheduled")
            {
                held.push(index);
            }
            decided_by.push(item.decided_by);
            items.push(change);
        }
        let set = ChangeSet {
            id: shown.id,
            agent_id: shown.agent_id,
            target_kind: shown.target_kind,
            target_id: shown.target_id,
            thread_id: String::new(),
            run_key: String::new(),
            status: shown.status,
            items,
            created_at: shown.created_at,
            resolved_at: None,
            vector_clock: assent_domain::VectorClock::default(),
        };
        Ok(RemoteSet {
            set,
            quorum,
            held,
            waits_until: shown.waits_until,
            decided_by,
        })
    }

    /// The sets written since the last call, waiting for the first write: read from
    /// the server's event stream, opened on the first call. `resync` (the stream fell
    /// behind) and a reopened stream name no set: every open set is looked at again.
    pub async fn written(&mut self) -> Result<Vec<Uuid>, CliError> {
        self.follow().await?;
        let base = self.base.clone();
        let Some(events) = self.events.as_mut() else {
            return Ok(Vec::new());
        };
        let (name, data) = events.next(&base).await?;
        Ok(match name.as_str() {
            "changeSetCreated" | "changeSetUpdated" => serde_json::from_str::<Value>(&data)
                .ok()
                .and_then(|data| data["changeSet"]["id"].as_str().map(str::to_owned))
                .and_then(|id| id.parse().ok())
                .into_iter()
                .collect(),
            // Missed events: the caller reloads everything, and looks at the set it
            // shows as if it had been written.
            "resync" => vec![Uuid::nil()],
            _ => Vec::new(),
        })
    }

    /// Opens the server's event stream, unless it is open: before the first look at
    /// the open sets, so that nothing written between that look and the stream is
    /// missed.
    pub async fn follow(&mut self) -> Result<(), CliError> {
        if self.events.is_none() {
            let url = self.endpoint("api/events")?;
            let response = self
                .client
                .get(url)
                .bearer_auth(&self.token)
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .send()
                .await
                .map_err(|e| {
                    CliError::Failed(
                        anyhow::Error::new(e).context(format!("cannot reach server {}", self.base)),
                    )
                })?;
            if !response.status().is_success() {
                return Err(CliError::failed(format!(
                    "server {} refused its event stream ({})",
                    self.base,
                    response.status()
                )));
            }
            self.events = Some(EventStream {
                response,
                buffer: String::new(),
                ready: VecDeque::new(),
            });
        }
        Ok(())
    }

    /// `POST …/confirm {revision}`: `{decision, message}`, plus how many approvals the
    /// item has when it is short of its quorum.
    pub async fn confirm(
        &self,
        set: Uuid,
        index: usize,
        revision: u32,
    ) -> Result<Answer, CliError> {
        self.call(
            Method::POST,
            &format!("api/change-sets/{set}/items/{index}/confirm"),
            Some(json!({"revision": revision})),
        )
        .await
    }

    /// `POST …/confirm {revision, forSession: true, pattern?}`: `{decision, message,
    /// sessionGrant}`, "yes, for this session" (a 400 when the item cannot take it).
    pub async fn confirm_for_session(
        &self,
        set: Uuid,
        index: usize,
        revision: u32,
        pattern: Option<&str>,
    ) -> Result<Answer, CliError> {
        let mut body = json!({"revision": revision, "forSession": true});
        if let Some(pattern) = pattern {
            body["pattern"] = json!(pattern);
        }
        self.call(
            Method::POST,
            &format!("api/change-sets/{set}/items/{index}/confirm"),
            Some(body),
        )
        .await
    }

    /// `POST …/reject {reason}`: the decision.
    pub async fn reject(
        &self,
        set: Uuid,
        index: usize,
        reason: Option<String>,
    ) -> Result<Answer, CliError> {
        self.call(
            Method::POST,
            &format!("api/change-sets/{set}/items/{index}/reject"),
            Some(json!({"reason": reason})),
        )
        .await
    }

    /// `POST …/edit {args, revision}`: `{decision, message}`.
    pub async fn edit(
        &self,
        set: Uuid,
        index: usize,
        args: Value,
        revision: u32,
    ) -> Result<Answer, CliError> {
        self.call(
            Method::POST,
            &format!("api/change-sets/{set}/items/{index}/edit"),
            Some(json!({"args": args, "revision": revision})),
        )
        .await
    }

    /// `POST …/defer`: the decision.
    pub async fn defer(&self, set: Uuid, index: usize) -> Result<Answer, CliError> {
        self.call(
            Method::POST,
            &format!("api/change-sets/{set}/items/{index}/defer"),
            None,
        )
        .await
    }
}

/// The server's event stream, read event by event.
struct EventStream {
    response: reqwest::Response,
    buffer: String,
    ready: VecDeque<(String, String)>,
}

impl EventStream {
    /// The next event, `(name, data)`: waits for the server. A stream the server ends
    /// (it stopped, the connection dropped) is an error: the reviewer cannot follow it.
    async fn next(&mut self, base: &Url) -> Result<(String, String), CliError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(event);
            }
            let chunk = self.response.chunk().await.map_err(|e| {
                CliError::Failed(
                    anyhow::Error::new(e)
                        .context(format!("lost the event stream of server {base}")),
                )
            })?;
            let Some(chunk) = chunk else {
                return Err(CliError::failed(format!(
                    "server {base} closed its event stream (it stopped?)"
                )));
            };
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            self.ready.extend(take_events(&mut self.buffer));
        }
    }
}

/// The complete events at the start of `buffer` (each ends with a blank line), as
/// `(event name, data)`; what is left is an event still arriving. Comments (the
/// keep-alive) and events without a name are dropped.
fn take_events(buffer: &mut String) -> Vec<(String, String)> {
    let normalized = buffer.replace("\r\n", "\n");
    let mut events = Vec::new();
    let mut rest = normalized.as_str();
    while let Some(end) = rest.find("\n\n") {
        let (block, after) = rest.split_at(end);
        rest = &after[2..];
        let mut name = String::new();
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        if !name.is_empty() {
            events.push((name, data.join("\n")));
        }
    }
    *buffer = rest.to_owned();
    events
}

/// A set as `GET /api/change-sets` shows it, the fields the reviewer reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetShown {
    id: Uuid,
    agent_id: String,
    target_kind: String,
    target_id: String,
    status: ChangeSetStatus,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    items: Vec<ItemShown>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    waits_until: Option<OffsetDateTime>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ItemShown {
    tool_name: String,
    args: Value,
    #[serde(default)]
    proposed_args: Option<Value>,
    #[serde(default)]
    edited_by: Option<String>,
    revision: u32,
    human_summary: String,
    status: ChangeItemStatus,
    #[serde(default)]
    before: Option<Value>,
    #[serde(default)]
    stale_detail: Option<String>,
    #[serde(default)]
    approvals: Option<Vec<Value>>,
    #[serde(default)]
    approvals_needed: Option<u32>,
    #[serde(default)]
    execution: Option<Value>,
    #[serde(default)]
    decided_by: Option<String>,
}

/// The server's base URL, `http://` or `https://`, ending in `/` so API paths join
/// below it.
fn parse_url(text: &str) -> Result<Url, CliError> {
    let text = text.trim();
    let mut url = Url::parse(text).map_err(|e| {
        CliError::Usage(format!(
            "invalid --server URL {:?}: {e} (expected http://HOST:PORT or https://HOST:PORT)",
            crate::render::cut(text, 80)
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(CliError::Usage(format!(
            "invalid --server URL {:?}: expected http://HOST:PORT or https://HOST:PORT",
            crate::render::cut(text, 80)
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CliError::Usage(
            "the --server URL carries credentials; pass the token with --token or ASSENT_TOKEN instead".to_owned(),
        ));
    }
    url.set_query(None);
    url.set_fragment(None);
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_taken_whole_and_a_partial_one_is_kept() {
        let mut buffer = ": keep-alive\n\nevent: changeSetCreated\ndata: {\"a\":1}\n\nevent: resync\r\ndata: {}\r\n\r\nevent: change".to_owned();
        let events = take_events(&mut buffer);
        assert_eq!(
            events,
            [
                ("changeSetCreated".to_owned(), "{\"a\":1}".to_owned()),
                ("resync".to_owned(), "{}".to_owned())
            ]
        );
        assert_eq!(buffer, "event: change");
    }

    #[test]
    fn server_urls_are_http_without_credentials() {
        assert_eq!(
            parse_url("http://127.0.0.1:7700")
                .map(|u| u.to_string())
                .ok(),
            Some("http://127.0.0.1:7700/".to_owned())
        );
        for bad in ["127.0.0.1:7700", "ftp://x", "http://u:p@host/", "not a url"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }
}
