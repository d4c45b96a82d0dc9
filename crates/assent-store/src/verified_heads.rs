//! Where `assent audit verify` last found each consent chain whole (migration 0033),
//! so the next verify starts after it ([`crate::proof::verify`]). Only a verify that
//! found nothing wrong over everything writes here ([`save`]); `--full` ignores it.

use crate::{Connection, StoreError, timefmt};
use serde::Serialize;
use sqlx::Row;
use time::OffsetDateTime;

const TABLE: &str = "verified_heads";

/// The version of the proof's rules: a head verified by another version is not
/// trusted as a starting point (its rules may have checked less), so the verify runs
/// in full.
pub const PROOF_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One chain's last verified entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedHead {
    /// The device whose chain it is.
    pub device_id: String,
    /// The position of the last entry verified (0: the chain was empty).
    pub seq: u64,
    /// That entry's hash.
    pub hash: String,
    /// The highest audit record id the verify saw: a record above it is new.
    pub audit_id: i64,
    /// When it was stored (`None` in a report's `chains`: not stored yet).
    #[serde(serialize_with = "as_text")]
    pub verified_at: Option<OffsetDateTime>,
    /// The binary's version that verified it.
    pub version: String,
}

fn as_text<S: serde::Serializer>(at: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => s.serialize_str(&timefmt::format(*at)),
        None => s.serialize_none(),
    }
}

/// Every chain's last verified head, by device.
pub async fn read(conn: &mut Connection) -> Result<Vec<VerifiedHead>, StoreError> {
    let rows = sqlx::query(
        "SELECT device_id, seq, hash, audit_id, verified_at, version FROM verified_heads ORDER BY device_id",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get("seq")?;
            let at: String = row.try_get("verified_at")?;
            Ok(VerifiedHead {
                device_id: row.try_get("device_id")?,
                seq: u64::try_from(seq)
                    .map_err(|e| StoreError::corrupt(TABLE, format!("seq {seq}: {e}")))?,
                hash: row.try_get("hash")?,
                audit_id: row.try_get("audit_id")?,
                verified_at: Some(timefmt::parse(TABLE, &at)?),
                version: row.try_get("version")?,
            })
        })
        .collect()
}

/// Replaces the stored heads with `heads` (what a clean verify covered), verified at
/// `now`, in the caller's transaction.
pub async fn save(
    conn: &mut Connection,
    heads: &[VerifiedHead],
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM verified_heads")
        .execute(&mut *conn)
        .await?;
    for head in heads {
        let seq = i64::try_from(head.seq)
            .map_err(|e| StoreError::corrupt(TABLE, format!("seq {}: {e}", head.seq)))?;
        sqlx::query(
            "INSERT INTO verified_heads (device_id, seq, hash, audit_id, verified_at, version)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&head.device_id)
        .bind(seq)
        .bind(&head.hash)
        .bind(head.audit_id)
        .bind(timefmt::format(now))
        .bind(&head.version)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
