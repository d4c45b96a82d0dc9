//! API tokens with roles: who may call which routes of the review server.
//!
//! A token's secret is shown once, when it is made; the database keeps only its
//! SHA-256, so a copy of the database does not hand out access. Secrets are 256 bits
//! from the operating system's random source, so a plain hash (no salt, no stretching)
//! is enough: there is nothing to guess from it.
//!
//! A reviewer or admin token names the person it was issued to (`--person`): it decides
//! as that person (`token:ID (NAME)`, [`assent_domain::token_reviewer`]), so one person
//! through a token and through another door counts once toward a quorum. Tokens made
//! before tokens named people have none, and are refused where a quorum counts people.

use crate::Connection;
use crate::{StoreError, timefmt};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::fmt;
use std::str::FromStr;
use time::OffsetDateTime;

/// What a token may do. Ordered: each role may do everything the one before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Posts one agent's wakes and reads that agent's sets, replies, history and tools;
    /// decides nothing, so an agent can never approve its own proposals.
    Agent,
    /// Decides: confirms, edits, rejects, defers, dismisses, answers sub-agents.
    Reviewer,
    /// Also configures: agents and their policies, device sync, tokens.
    Admin,
}

impl Role {
    /// The name used on the command line, in the API and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Reviewer => "reviewer",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "agent" => Ok(Self::Agent),
            "reviewer" => Ok(Self::Reviewer),
            "admin" => Ok(Self::Admin),
            other => Err(StoreError::InvalidToken(format!(
                "unknown role {other:?}: expected agent, reviewer or admin"
            ))),
        }
    }
}

/// A stored token, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    /// Names the token in lists and in `revoke`; not a secret.
    pub id: String,
    /// What it may do.
    pub role: Role,
    /// The one agent an agent token acts for; `None` for the other roles.
    pub agent_id: Option<String>,
    /// The person a reviewer or admin token was issued to; `None` for agent tokens and
    /// for tokens made before tokens named people.
    pub person: Option<String>,
    /// When it was made.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it was revoked; a revoked token opens nothing.
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// A token just made: the only time its secret is known.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The stored token.
    pub token: ApiToken,
    /// The bearer secret to hand to whoever will use it.
    pub secret: String,
}

/// Prefix of generated secrets, so that a leaked one is recognisable in logs and scans.
const SECRET_PREFIX: &str = "assent_";

/// The SHA-256 of a secret, as lowercase hex: what the database keeps.
fn secret_hash(secret: &str) -> String {
    assent_domain::lower_hex(&Sha256::digest(secret.as_bytes()))
}

/// Makes a token that names no person ([`issue_named`] without one): an agent token,
/// or a reviewer or admin token that decides what one person may.
pub async fn issue(
    conn: &mut Connection,
    role: Role,
    agent_id: Option<&str>,
    now: OffsetDateTime,
) -> Result<IssuedToken, StoreError> {
    issue_named(conn, role, agent_id, None, now).await
}

/// The longest person name a token takes (what a reviewer's name is: a short label).
pub const MAX_PERSON_CHARS: usize = 64;

/// Makes a token. An agent token needs `agent_id`, naming an agent that exists; the
/// other roles take none. A reviewer or admin token names `person`, the one who decides
/// through it; without one it decides what one person may, and is refused for items
/// that need more than one (a quorum counts people, and a token naming nobody could be
/// anyone's second door). An agent token decides nothing and takes no person.
pub async fn issue_named(
    conn: &mut Connection,
    role: Role,
    agent_id: Option<&str>,
    person: Option<&str>,
    now: OffsetDateTime,
) -> Result<IssuedToken, StoreError> {
    let agent_id = agent_id.map(str::trim).filter(|a| !a.is_empty());
    let person = person.map(str::trim);
    match (role, person) {
        (Role::Agent, Some(person)) => {
            return Err(StoreError::InvalidToken(format!(
                "an agent token decides nothing, so it names no person; drop --person {person:?}"
            )));
        }
        (_, Some(person)) => check_person(person)?,
        (_, None) => {}
    }
    match (role, agent_id) {
        (Role::Agent, None) => {
            return Err(StoreError::InvalidToken(
                "an agent token needs the agent it acts for (--agent)".to_owned(),
            ));
        }
        (Role::Reviewer | Role::Admin, Some(agent)) => {
            return Err(StoreError::InvalidToken(format!(
                "only agent tokens are bound to an agent; a {role} token cannot be bound to {agent:?}"
            )));
        }
        (Role::Agent, Some(agent)) => {
            let known = sqlx::query("SELECT 1 FROM agents WHERE id = $1")
                .bind(agent)
                .fetch_optional(&mut *conn)
                .await?;
            if known.is_none() {
                return Err(StoreError::InvalidToken(format!(
                    "no agent {agent:?}: create it first (assent agent create)"
                )));
            }
        }
        (Role::Reviewer | Role::Admin, None) => {}
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let secret = format!(
        "{SECRET_PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    sqlx::query(
        "INSERT INTO api_tokens (id, role, agent_id, person, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(role.as_str())
    .bind(agent_id)
    .bind(person)
    .bind(secret_hash(&secret))
    .bind(timefmt::format(now))
    .execute(&mut *conn)
    .await?;
    Ok(IssuedToken {
        token: ApiToken {
            id,
            role,
            agent_id: agent_id.map(str::to_owned),
            person: person.map(str::to_owned),
            created_at: now,
            revoked_at: None,
        },
        secret,
    })
}

/// Refuses a person name a decision's `by` could not carry as one person: empty,
/// too long, with control characters or parentheses (which end a door's record,
/// `token:ID (NAME)`), or a door's own record (`slack:U1 (bob)`) that
/// [`assent_domain::person`] would read as someone else.
fn check_person(person: &str) -> Result<(), StoreError> {
    let refused = |why: &str| {
        Err(StoreError::InvalidToken(format!(
            "--person {person:?} {why}"
        )))
    };
    if person.is_empty() {
        return refused("is empty: name the person the token is issued to");
    }
    if person.chars().count() > MAX_PERSON_CHARS {
        return refused(&format!("is longer than {MAX_PERSON_CHARS} characters"));
    }
    if person
        .chars()
        .any(|c| c.is_control() || matches!(c, '(' | ')'))
    {
        return refused("holds a control character or a parenthesis");
    }
    if assent_domain::person(person) != person || person.contains(':') {
        return refused("reads as a door's record (NAME:…), not a person's name");
    }
    Ok(())
}

fn from_row(row: &sqlx::any::AnyRow) -> Result<ApiToken, StoreError> {
    let role: String = row.try_get("role")?;
    let revoked_at: Option<String> = row.try_get("revoked_at")?;
    Ok(ApiToken {
        id: row.try_get("id")?,
        role: role
            .parse()
            .map_err(|e: StoreError| StoreError::corrupt("api_tokens", e))?,
        agent_id: row.try_get("agent_id")?,
        person: row.try_get("person")?,
        created_at: timefmt::parse("api_tokens", &row.try_get::<String, _>("created_at")?)?,
        revoked_at: revoked_at
            .map(|at| timefmt::parse("api_tokens", &at))
            .transpose()?,
    })
}

/// Every token, revoked ones included, oldest first.
pub async fn list(conn: &mut Connection) -> Result<Vec<ApiToken>, StoreError> {
    sqlx::query(
        "SELECT id, role, agent_id, person, created_at, revoked_at FROM api_tokens ORDER BY created_at, id",
    )
    .fetch_all(conn)
    .await?
    .iter()
    .map(from_row)
    .collect()
}

/// Revokes the token `id`. `Ok(None)` when no token has that id; revoking a revoked
/// token keeps its first revocation time.
pub async fn revoke(
    conn: &mut Connection,
    id: &str,
    now: OffsetDateTime,
) -> Result<Option<ApiToken>, StoreError> {
    sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
        .bind(timefmt::format(now))
        .bind(id.trim())
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "SELECT id, role, agent_id, person, created_at, revoked_at FROM api_tokens WHERE id = $1",
    )
    .bind(id.trim())
    .fetch_optional(conn)
    .await?
    .as_ref()
    .map(from_row)
    .transpose()
}

/// The unrevoked token whose secret is `secret`, if any.
pub async fn authenticate(
    conn: &mut Connection,
    secret: &str,
) -> Result<Option<ApiToken>, StoreError> {
    // Only generated secrets can match: skip the lookup for anything else.
    if !secret.starts_with(SECRET_PREFIX) {
        return Ok(None);
    }
    sqlx::query(
        "SELECT id, role, agent_id, person, created_at, revoked_at FROM api_tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
    )
    .bind(secret_hash(secret))
    .fetch_optional(conn)
    .await?
    .as_ref()
    .map(from_row)
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use assent_tools::AgentPolicy;

    fn at(minute: i64) -> OffsetDateTime {
        time::macros::datetime!(2026-11-23 10:00 UTC) + time::Duration::minutes(minute)
    }

    #[tokio::test]
    async fn a_token_authenticates_until_revoked_and_its_secret_is_not_stored() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        crate::agents::upsert(&mut conn, "triage", &AgentPolicy::new(["work"]), at(0))
            .await
            .expect("agent");
        let issued = issue(&mut conn, Role::Agent, Some("triage"), at(1))
            .await
            .expect("issued");
        assert!(issued.secret.starts_with("assent_"));
        let found = authenticate(&mut conn, &issued.secret)
            .await
            .expect("lookup")
            .expect("found");
        assert_eq!(found, issued.token);
        assert_eq!(found.agent_id.as_deref(), Some("triage"));

        let stored: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE secret_hash = $1 OR id = $1")
                .bind(&issued.secret)
                .fetch_one(&mut *conn)
                .await
                .expect("count");
        assert_eq!(stored, 0, "the secret itself is never stored");

        let revoked = revoke(&mut conn, &issued.token.id, at(2))
            .await
            .expect("revoke")
            .expect("known");
        assert_eq!(revoked.revoked_at, Some(at(2)));
        assert!(
            authenticate(&mut conn, &issued.secret)
                .await
                .expect("lookup")
                .is_none()
        );
        let again = revoke(&mut conn, &issued.token.id, at(3))
            .await
            .expect("revoke")
            .expect("known");
        assert_eq!(again.revoked_at, Some(at(2)), "the first revocation stays");
        assert!(
            revoke(&mut conn, "nope", at(3))
                .await
                .expect("ok")
                .is_none()
        );
    }

    #[tokio::test]
    async fn agent_tokens_need_a_known_agent_and_others_take_none() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let err = issue(&mut conn, Role::Agent, None, at(0))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "an agent token needs the agent it acts for (--agent)"
        );
        let err = issue(&mut conn, Role::Agent, Some("ghost"), at(0))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no agent \"ghost\": create it first (assent agent create)"
        );
        let err = issue(&mut conn, Role::Reviewer, Some("ghost"), at(0))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("only agent tokens"), "{err}");
        assert!(list(&mut conn).await.expect("list").is_empty());
        let admin = issue(&mut conn, Role::Admin, None, at(0))
            .await
            .expect("ok");
        assert_eq!(list(&mut conn).await.expect("list"), vec![admin.token]);
        assert!("owner".parse::<Role>().is_err());
    }

    #[tokio::test]
    async fn a_token_names_its_person_and_a_name_that_reads_as_someone_else_is_refused() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut conn = store.read_connection().await.expect("conn");
        let alice = issue_named(&mut conn, Role::Reviewer, None, Some(" alice "), at(0))
            .await
            .expect("issued");
        assert_eq!(alice.token.person.as_deref(), Some("alice"));
        let found = authenticate(&mut conn, &alice.secret)
            .await
            .expect("lookup")
            .expect("found");
        assert_eq!(found.person.as_deref(), Some("alice"));
        assert_eq!(
            assent_domain::person(&assent_domain::token_reviewer(
                &found.id,
                found.person.as_deref()
            )),
            "alice"
        );
        for bad in [
            "",
            "slack:U1 (bob)",
            "token:1 (bob)",
            "a(b",
            "x\ny",
            &"n".repeat(65),
        ] {
            let err = issue_named(&mut conn, Role::Reviewer, None, Some(bad), at(0))
                .await
                .expect_err(bad);
            assert!(err.to_string().starts_with("--person "), "{bad:?}: {err}");
        }
        crate::agents::upsert(&mut conn, "triage", &AgentPolicy::new(["work"]), at(0))
            .await
            .expect("agent");
        let err = issue_named(&mut conn, Role::Agent, Some("triage"), Some("alice"), at(0))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("names no person"), "{err}");
        let unnamed = issue(&mut conn, Role::Reviewer, None, at(1))
            .await
            .expect("issued");
        assert_eq!(unnamed.token.person, None);
        let listed = list(&mut conn).await.expect("list");
        assert_eq!(listed, vec![alice.token, unnamed.token]);
    }
}
