//! API tokens with roles: who may call which routes of the review server.
//!
//! A token's secret is shown once, when it is made; the database keeps only its
//! SHA-256, so a copy of the database does not hand out access. Secrets are 256 bits
//! from the operating system's random source, so a plain hash (no salt, no stretching)
//! is enough: there is nothing to guess from it.

use crate::{StoreError, timefmt};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Row};
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

/// Makes a token. An agent token needs `agent_id`, naming an agent that exists; the
/// other roles take none.
pub async fn issue(
    conn: &mut AnyConnection,
    role: Role,
    agent_id: Option<&str>,
    now: OffsetDateTime,
) -> Result<IssuedToken, StoreError> {
    let agent_id = agent_id.map(str::trim).filter(|a| !a.is_empty());
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
        "INSERT INTO api_tokens (id, role, agent_id, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(role.as_str())
    .bind(agent_id)
    .bind(secret_hash(&secret))
    .bind(timefmt::format(now))
    .execute(&mut *conn)
    .await?;
    Ok(IssuedToken {
        token: ApiToken {
            id,
            role,
            agent_id: agent_id.map(str::to_owned),
            created_at: now,
            revoked_at: None,
        },
        secret,
    })
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
        created_at: timefmt::parse("api_tokens", &row.try_get::<String, _>("created_at")?)?,
        revoked_at: revoked_at
            .map(|at| timefmt::parse("api_tokens", &at))
            .transpose()?,
    })
}

/// Every token, revoked ones included, oldest first.
pub async fn list(conn: &mut AnyConnection) -> Result<Vec<ApiToken>, StoreError> {
    sqlx::query(
        "SELECT id, role, agent_id, created_at, revoked_at FROM api_tokens ORDER BY created_at, id",
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
    conn: &mut AnyConnection,
    id: &str,
    now: OffsetDateTime,
) -> Result<Option<ApiToken>, StoreError> {
    sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
        .bind(timefmt::format(now))
        .bind(id.trim())
        .execute(&mut *conn)
        .await?;
    sqlx::query("SELECT id, role, agent_id, created_at, revoked_at FROM api_tokens WHERE id = $1")
        .bind(id.trim())
        .fetch_optional(conn)
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The unrevoked token whose secret is `secret`, if any.
pub async fn authenticate(
    conn: &mut AnyConnection,
    secret: &str,
) -> Result<Option<ApiToken>, StoreError> {
    // Only generated secrets can match: skip the lookup for anything else.
    if !secret.starts_with(SECRET_PREFIX) {
        return Ok(None);
    }
    sqlx::query(
        "SELECT id, role, agent_id, created_at, revoked_at FROM api_tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
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
        let mut conn = store.pool().acquire().await.expect("conn");
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
        let mut conn = store.pool().acquire().await.expect("conn");
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
}
