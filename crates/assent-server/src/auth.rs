//! Who is calling, and what they may do: every `/api` request presents a bearer token,
//! which names a [`Principal`] with a [`Role`]; each group of routes requires a role.
//!
//! The token given at start (`--token`, `ASSENT_TOKEN`, the generated token file) is
//! an admin's. Tokens made with `assent tokens add` are looked up by the hash of their
//! secret. An agent token acts for one agent only: it may post that agent's wakes and
//! read what concerns that agent, and nothing it holds can decide a proposal.

use crate::{AppState, ServerError};
use assent_confirm::admin::Role;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The caller of a request, as its token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// What the token may do.
    pub role: Role,
    /// The agent an agent token acts for.
    pub agent_id: Option<String>,
    /// The stored token's id; `None` for the token the server was started with.
    pub token_id: Option<String>,
    /// The person the stored token was issued to (`assent tokens add --person`);
    /// `None` for the server's own token and for tokens that name nobody.
    pub person: Option<String>,
}

impl Principal {
    /// Who decides, as a quorum counts people (`assent agent ask … --approvals N`):
    /// `token:ID (NAME)` for a token issued to NAME ([`assent_domain::token_reviewer`],
    /// read back as NAME by [`assent_domain::person`], so NAME's token and NAME's Slack
    /// click or `--as NAME` are one person), the bare token id for a token naming
    /// nobody, or `admin` for the server's own token.
    pub fn identity(&self) -> String {
        match &self.token_id {
            Some(id) => assent_domain::token_reviewer(id, self.person.as_deref()),
            None => "admin".to_owned(),
        }
    }

    /// The credential, when it names no person: what a confirmation refuses to count
    /// toward a quorum ([`assent_confirm::ConfirmationService::by_unnamed`]).
    pub fn unnamed(&self) -> Option<String> {
        match (&self.token_id, &self.person) {
            (_, Some(_)) => None,
            (Some(id), None) => Some(format!("token {id}")),
            (None, None) => Some("the server's own token".to_owned()),
        }
    }

    /// The confirmation service of `engine`, deciding as this caller: as its person,
    /// and refused for quorums when its credential names nobody.
    pub fn confirmations(
        &self,
        engine: &assent_confirm::Engine,
    ) -> assent_confirm::ConfirmationService {
        let service = engine.confirmations();
        match self.unnamed() {
            Some(what) => service.by_unnamed(self.identity(), what),
            None => service.by(self.identity()),
        }
    }

    /// The agent this caller is confined to, when it holds an agent token.
    pub fn confined_to(&self) -> Option<&str> {
        match self.role {
            Role::Agent => self.agent_id.as_deref(),
            Role::Reviewer | Role::Admin => None,
        }
    }

    /// Refuses (403) an agent token acting for another agent than its own.
    pub fn may_act_for(&self, agent_id: &str) -> Result<(), ServerError> {
        match self.confined_to() {
            Some(own) if own != agent_id.trim() => Err(ServerError::Forbidden(format!(
                "this token acts for agent {own:?} only, not for {:?}",
                agent_id.trim()
            ))),
            _ => Ok(()),
        }
    }

    /// The agent a read is about: the one asked for (checked against the token), or
    /// the token's own agent when none was asked for.
    pub fn scope_agent(&self, asked: Option<String>) -> Result<Option<String>, ServerError> {
        match (asked, self.confined_to()) {
            (Some(asked), _) => {
                self.may_act_for(&asked)?;
                Ok(Some(asked))
            }
            (None, own) => Ok(own.map(str::to_owned)),
        }
    }
}

/// Lets a request through only with `Authorization: Bearer <token>` naming a known,
/// unrevoked token, and hands its [`Principal`] to the handlers.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return ServerError::Unauthorized.into_response();
    };
    let principal = if same_secret(presented.as_bytes(), state.token.as_bytes()) {
        Principal {
            role: Role::Admin,
            agent_id: None,
            token_id: None,
            person: None,
        }
    } else {
        let found = state
            .engine
            .admin()
            .authenticate_token(presented)
            .await
            .map_err(ServerError::from);
        match found {
            Ok(Some(token)) => Principal {
                role: token.role,
                agent_id: token.agent_id,
                token_id: Some(token.id),
                person: token.person,
            },
            Ok(None) => return ServerError::Unauthorized.into_response(),
            Err(error) => return error.into_response(),
        }
    };
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// Refuses (403) callers below `needed`.
async fn require(needed: Role, request: Request, next: Next) -> Response {
    let role = request
        .extensions()
        .get::<Principal>()
        .map(|principal| principal.role);
    match role {
        Some(role) if role >= needed => next.run(request).await,
        Some(role) => ServerError::Forbidden(format!(
            "this route needs a {needed} token; this one is a {role} token"
        ))
        .into_response(),
        // `authenticate` runs first on every `/api` route.
        None => ServerError::Unauthorized.into_response(),
    }
}

/// The routes where a person decides.
pub(crate) async fn require_reviewer(request: Request, next: Next) -> Response {
    require(Role::Reviewer, request, next).await
}

/// The routes that configure the server.
pub(crate) async fn require_admin(request: Request, next: Next) -> Response {
    require(Role::Admin, request, next).await
}

/// Compares two secrets in time that depends on their lengths only.
fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    presented.len() == expected.len()
        && presented
            .iter()
            .zip(expected)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
        assert!(!same_secret(b"", b"abc"));
    }

    #[test]
    fn an_agent_token_is_confined_to_its_agent() {
        let agent = Principal {
            role: Role::Agent,
            agent_id: Some("triage".to_owned()),
            token_id: Some("t".to_owned()),
            person: None,
        };
        assert!(agent.may_act_for("triage").is_ok());
        assert!(matches!(
            agent.may_act_for("other"),
            Err(ServerError::Forbidden(_))
        ));
        assert_eq!(
            agent.scope_agent(None).expect("own"),
            Some("triage".to_owned())
        );
        assert!(agent.scope_agent(Some("other".to_owned())).is_err());
        let reviewer = Principal {
            role: Role::Reviewer,
            agent_id: None,
            token_id: None,
            person: None,
        };
        assert!(reviewer.may_act_for("anyone").is_ok());
        assert_eq!(reviewer.scope_agent(None).expect("all"), None);
    }

    #[test]
    fn a_token_decides_as_its_person_and_one_naming_nobody_says_so() {
        let token = |person: Option<&str>| Principal {
            role: Role::Reviewer,
            agent_id: None,
            token_id: Some("3fa9c1d2e4b5".to_owned()),
            person: person.map(str::to_owned),
        };
        let alice = token(Some("alice"));
        assert_eq!(alice.identity(), "token:3fa9c1d2e4b5 (alice)");
        assert_eq!(assent_domain::person(&alice.identity()), "alice");
        assert_eq!(alice.unnamed(), None);
        let nobody = token(None);
        assert_eq!(nobody.identity(), "3fa9c1d2e4b5");
        assert_eq!(nobody.unnamed().as_deref(), Some("token 3fa9c1d2e4b5"));
        let server = Principal {
            role: Role::Admin,
            agent_id: None,
            token_id: None,
            person: None,
        };
        assert_eq!(server.identity(), "admin");
        assert_eq!(server.unnamed().as_deref(), Some("the server's own token"));
    }
}
