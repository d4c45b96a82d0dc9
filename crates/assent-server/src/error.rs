//! The one error type of the review server, and how each error becomes an RFC 9457
//! problem-details response.

use assent_confirm::{ConfirmError, ConflictKind};
use assent_store::StoreError;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Why a request or the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The request is malformed or names something that cannot be used (400).
    #[error("{0}")]
    BadRequest(String),
    /// No valid `Authorization: Bearer` token (401).
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// The token is valid but its role may not do this (403): an agent token on a
    /// decision route, or acting for another agent.
    #[error("{0}")]
    Forbidden(String),
    /// The thing the path names does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with this server's state or with what already happened:
    /// a sync batch claiming the server's own host id, a second answer to a delegated
    /// request (409).
    #[error("{0}")]
    Conflict(String),
    /// The request body did not arrive within the server's body-read timeout (408).
    #[error("{0}")]
    Timeout(String),
    /// The body is over the request-size limit (413).
    #[error("{0}")]
    TooLarge(String),
    /// A token for the server could not be used or stored.
    #[error("{0}")]
    Token(String),
    /// An engine service refused or failed.
    #[error(transparent)]
    Confirm(#[from] ConfirmError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server broke one of its own invariants (500; details in the log).
    #[error("{0}")]
    Internal(String),
    /// Reading or writing a file, or serving on a socket, failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

/// An RFC 9457 problem-details body, with the engine's conflict kind as an extension
/// member (`conflictKind`, e.g. `revisionMoved`) when a conflict refused the request.
#[derive(Debug, Serialize)]
struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    #[serde(rename = "conflictKind", skip_serializing_if = "Option::is_none")]
    conflict_kind: Option<&'static str>,
}

impl ServerError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            // A token that cannot be made as asked, refused by the store (`assent
            // tokens add`'s check) through the engine or not.
            Self::Store(StoreError::InvalidToken(_))
            | Self::Confirm(ConfirmError::Store(StoreError::InvalidToken(_))) => {
                StatusCode::BAD_REQUEST
            }
            Self::Confirm(error) => confirm_status(error),
            Self::Token(_) | Self::Store(_) | Self::Internal(_) | Self::Io { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

fn confirm_status(error: &ConfirmError) -> StatusCode {
    match error {
        ConfirmError::ChangeSetNotFound(_)
        | ConfirmError::ItemNotFound { .. }
        | ConfirmError::UnknownCorrelationId(_)
        | ConfirmError::GrantNotFound(_)
        | ConfirmError::RejectionNotFound(_)
        | ConfirmError::JobNotFound(_) => StatusCode::NOT_FOUND,
        ConfirmError::Conflict { .. }
        | ConfirmError::TargetChanged { .. }
        | ConfirmError::DuplicateCorrelationId(_)
        | ConfirmError::AgentNotHere(_)
        | ConfirmError::NoInteractiveSession => StatusCode::CONFLICT,
        ConfirmError::InvalidArgs { .. }
        | ConfirmError::MissingCorrelationId
        | ConfirmError::InvalidReason(_)
        | ConfirmError::InvalidAgentName(_)
        | ConfirmError::UnknownAgent(_)
        | ConfirmError::UnknownTarget(_)
        | ConfirmError::UnknownTool(_)
        | ConfirmError::NoCompensation(_)
        | ConfirmError::InvalidRule(_)
        | ConfirmError::InvalidSetting(_)
        | ConfirmError::InvalidPolicyFile { .. }
        | ConfirmError::InvalidGrant(_)
        | ConfirmError::EditMovesTarget { .. }
        | ConfirmError::InvalidCursor(_)
        | ConfirmError::Calls(_) => StatusCode::BAD_REQUEST,
        ConfirmError::PolicyDenied { .. } => StatusCode::FORBIDDEN,
        ConfirmError::ExecutionTimedOut { .. } => StatusCode::GATEWAY_TIMEOUT,
        ConfirmError::HandlerFailed { .. }
        | ConfirmError::Store(_)
        | ConfirmError::InvalidWorker(_) => StatusCode::INTERNAL_SERVER_ERROR,
        // A refusal this server does not know yet: answered as a failure (its detail
        // logged, not shown) until it is given a status of its own here.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The problem-details response for `status` with `detail`, naming the conflict kind
/// when a conflict refused the request.
fn problem(status: StatusCode, detail: String, conflict: Option<ConflictKind>) -> Response {
    let body = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail,
        conflict_kind: conflict.map(ConflictKind::as_str),
    };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

impl IntoResponse for ServerError {
    fn into_response(self) -> Response {
        let status = self.status();
        let detail = if status.is_server_error()
            && !matches!(self, Self::Confirm(ConfirmError::HandlerFailed { .. }))
        {
            // Internal failures are logged in full; the client learns only that one
            // happened, not the paths or SQL behind it.
            tracing::error!(error = %self, "request failed");
            "internal error; see the server log".to_owned()
        } else {
            self.to_string()
        };
        let conflict = match &self {
            Self::Confirm(error) => error.conflict_kind(),
            _ => None,
        };
        let mut response = problem(status, detail, conflict);
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Whether the body behind a rejection stopped arriving (the server's body-read timeout).
fn body_timed_out(rejection: &JsonRejection) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(error) = cause {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = error.source();
    }
    false
}

impl From<JsonRejection> for ServerError {
    fn from(rejection: JsonRejection) -> Self {
        if body_timed_out(&rejection) {
            Self::Timeout("the request body did not arrive in time".to_owned())
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::TooLarge("the request body is over the size limit".to_owned())
        } else {
            Self::BadRequest(format!("invalid JSON body: {}", rejection.body_text()))
        }
    }
}

impl From<QueryRejection> for ServerError {
    fn from(rejection: QueryRejection) -> Self {
        Self::BadRequest(format!("invalid query: {}", rejection.body_text()))
    }
}

impl From<PathRejection> for ServerError {
    fn from(rejection: PathRejection) -> Self {
        Self::BadRequest(format!("invalid path: {}", rejection.body_text()))
    }
}
