//! Device sync as the doors drive it: a batch exported (whole, or claiming its outbox
//! messages while it travels to a peer), a batch from another device merged (refused
//! ones recorded in the imports' log), the exchange a peer's server answers with, and
//! what sync left to read: the peers merged from, the conflicts lost, the messages
//! still in the sync outbox. The entities synced are the engine's host's
//! ([`Host::entities`](crate::Host::entities)), none for a host without them.

use crate::{Admin, ConfirmError, Engine};
use assent_store::outbox::{self, OutboxMessage};
use assent_store::sync::{
    self, ClaimedExport, ConflictRecord, HostEntities, ImportReport, NoEntities, Peer,
};
use assent_store::{StoreError, WriteTx};
use assent_sync::{SyncBatch, SyncError};
use time::OffsetDateTime;
use uuid::Uuid;

impl Engine {
    /// The entities this engine's host syncs.
    fn synced_entities(&self) -> &dyn HostEntities {
        self.host.entities().unwrap_or(&NoEntities)
    }

    /// Records the refusal of `batch` in the imports' log, after the import's
    /// transaction rolled back; a failure to record it is logged, and the refusal is
    /// what the caller gets either way (the store's error as it was, never turned
    /// into a conflict: a door tells a bad batch from its own failures by it).
    async fn refused(
        &self,
        batch: &SyncBatch,
        error: StoreError,
        now: OffsetDateTime,
    ) -> ConfirmError {
        if let Err(record) = sync::record_refusal(&self.store, batch, &error, now).await {
            tracing::warn!(%record, "could not record the refused sync batch");
        }
        ConfirmError::Store(error)
    }

    /// Merges `batch` in a new write transaction, which it returns with the report for
    /// the caller to add to and commit. A refused batch rolls that transaction back
    /// (nothing of it stays), is recorded, and comes back as the error.
    async fn merge_or_refuse(
        &self,
        batch: &SyncBatch,
        now: OffsetDateTime,
    ) -> Result<(WriteTx, ImportReport), ConfirmError> {
        let mut tx = self.store.begin_write().await?;
        let entities = self.synced_entities();
        match sync::import(
            tx.connection(),
            self.store.device_id(),
            entities,
            batch,
            now,
        )
        .await
        {
            Ok(report) => Ok((tx, report)),
            Err(error) => {
                drop(tx);
                Err(self.refused(batch, error, now).await)
            }
        }
    }
}

impl Admin<'_> {
    /// Exports everything this device syncs as batch `batch_id`, in one transaction
    /// that also counts the outbox as drained, and hands the batch to `keep` (written
    /// to a file, say) before that transaction commits: when `keep` fails, nothing is
    /// drained and its error is returned. Returns the batch and what `keep` returned.
    #[tracing::instrument(skip(self, keep))]
    pub async fn export_sync_batch<T, E>(
        &self,
        batch_id: Uuid,
        now: OffsetDateTime,
        keep: impl FnOnce(&SyncBatch) -> Result<T, E>,
    ) -> Result<(SyncBatch, T), E>
    where
        E: From<ConfirmError>,
    {
        let mut tx = self
            .engine
            .store
            .begin_write()
            .await
            .map_err(ConfirmError::from)?;
        let batch = sync::export(
            tx.connection(),
            self.engine.store.device_id(),
            self.engine.synced_entities(),
            batch_id,
            now,
        )
        .await
        .map_err(ConfirmError::from)?;
        let kept = keep(&batch)?;
        tx.commit().await.map_err(ConfirmError::from)?;
        Ok((batch, kept))
    }

    /// Merges `batch` from another device, in one transaction. A batch the store
    /// refuses (its checks of "What an import trusts") changes nothing, is recorded
    /// in the imports' log, and is returned as `ConfirmError::Store` with the store's
    /// error (a `StoreError::Sync` for a batch that cannot be merged).
    #[tracing::instrument(skip_all, fields(batch = %batch.batch_id, from = %batch.from_host))]
    pub async fn import_sync_batch(
        &self,
        batch: &SyncBatch,
        now: OffsetDateTime,
    ) -> Result<ImportReport, ConfirmError> {
        let (tx, report) = self.engine.merge_or_refuse(batch, now).await?;
        tx.commit().await?;
        Ok(report)
    }

    /// A peer's side of a sync round trip: merges the caller's `batch` and exports
    /// this device's own as batch `answer_id` (taken after that merge), in one write
    /// transaction. A batch claiming this device's own host id is refused before the
    /// write lock is taken (a device pointed at itself must not wait on its own lock)
    /// and not recorded; any other refused batch is, as with
    /// [`Admin::import_sync_batch`], and exports nothing.
    #[tracing::instrument(skip_all, fields(batch = %batch.batch_id, from = %batch.from_host))]
    pub async fn exchange_sync_batch(
        &self,
        batch: &SyncBatch,
        answer_id: Uuid,
        now: OffsetDateTime,
    ) -> Result<(ImportReport, SyncBatch), ConfirmError> {
        let host_id = self.engine.store.device_id();
        if batch.from_host == host_id {
            return Err(ConfirmError::Store(StoreError::Sync(
                SyncError::FromThisHost {
                    batch_id: batch.batch_id,
                    host: batch.from_host.clone(),
                },
            )));
        }
        let (mut tx, report) = self.engine.merge_or_refuse(batch, now).await?;
        let entities = self.engine.synced_entities();
        let answer = sync::export(tx.connection(), host_id, entities, answer_id, now).await?;
        tx.commit().await?;
        Ok((report, answer))
    }

    /// Exports this device's batch `batch_id` for a peer, in a short transaction of
    /// its own that claims the outbox messages it covers for `lease`: nothing stays
    /// locked while the batch travels. Settle the claim with
    /// [`Admin::merge_peer_batch`] or [`Admin::release_sync_export`]; a claim never
    /// settled runs out after `lease`.
    #[tracing::instrument(skip(self))]
    pub async fn claim_sync_export(
        &self,
        batch_id: Uuid,
        now: OffsetDateTime,
        lease: time::Duration,
    ) -> Result<ClaimedExport, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let export = sync::export_claiming(
            tx.connection(),
            self.engine.store.device_id(),
            self.engine.synced_entities(),
            batch_id,
            now,
            lease,
        )
        .await?;
        tx.commit().await?;
        Ok(export)
    }

    /// Merges the peer's answer `batch` to `export`, and marks the messages `export`
    /// claimed sent, in one transaction, against the state as it is now. A refused
    /// batch is recorded and returned as with [`Admin::import_sync_batch`], and the
    /// claim stays (release it).
    #[tracing::instrument(skip_all, fields(batch = %batch.batch_id, from = %batch.from_host))]
    pub async fn merge_peer_batch(
        &self,
        export: &ClaimedExport,
        batch: &SyncBatch,
        now: OffsetDateTime,
    ) -> Result<ImportReport, ConfirmError> {
        let (mut tx, report) = self.engine.merge_or_refuse(batch, now).await?;
        sync::mark_exported(tx.connection(), export, now).await?;
        tx.commit().await?;
        Ok(report)
    }

    /// Puts the outbox messages `export` claimed back in the queue (its batch did not
    /// get through), in one transaction.
    #[tracing::instrument(skip_all)]
    pub async fn release_sync_export(&self, export: &ClaimedExport) -> Result<(), ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        sync::release_export(tx.connection(), export).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The devices this one merged batches from, with the last batch of each.
    pub async fn sync_peers(&self) -> Result<Vec<Peer>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(sync::peers(&mut conn).await?)
    }

    /// The decisions that lost a sync conflict to an earlier one on another device.
    pub async fn sync_conflicts(&self) -> Result<Vec<ConflictRecord>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(sync::conflicts(&mut conn).await?)
    }

    /// The sync outbox's messages not yet delivered (pending, in flight, dead), oldest
    /// first, at most `limit`.
    pub async fn undelivered_outbox(&self, limit: u32) -> Result<Vec<OutboxMessage>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(outbox::undelivered(&mut conn, limit).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::bare_engine as device;

    fn at(minute: i64) -> OffsetDateTime {
        time::macros::datetime!(2026-11-23 10:00 UTC) + time::Duration::minutes(minute)
    }

    #[tokio::test]
    async fn batches_travel_both_ways_and_a_refused_one_is_recorded() {
        let (laptop, phone) = (device().await, device().await);
        assert_ne!(laptop.store().device_id(), phone.store().device_id());
        let before = laptop
            .admin()
            .undelivered_outbox(100)
            .await
            .expect("outbox");
        let kept: Result<(SyncBatch, ()), ConfirmError> = laptop
            .admin()
            .export_sync_batch(Uuid::from_u128(1), at(0), |_| {
                Err(ConfirmError::InvalidSetting(
                    "the file cannot be written".to_owned(),
                ))
            })
            .await;
        assert!(kept.is_err());
        assert_eq!(
            laptop
                .admin()
                .undelivered_outbox(100)
                .await
                .expect("outbox"),
            before,
            "nothing drained when the batch was not kept"
        );
        let (batch, seen) = laptop
            .admin()
            .export_sync_batch(Uuid::from_u128(2), at(1), |batch| {
                Ok::<_, ConfirmError>(batch.batch_id)
            })
            .await
            .expect("exported");
        assert_eq!(
            (seen, batch.from_host.as_str()),
            (Uuid::from_u128(2), laptop.store().device_id())
        );

        let report = phone
            .admin()
            .import_sync_batch(&batch, at(2))
            .await
            .expect("merged");
        assert!(!report.replayed);
        assert!(
            phone
                .admin()
                .import_sync_batch(&batch, at(3))
                .await
                .expect("again")
                .replayed
        );
        let peers = phone.admin().sync_peers().await.expect("peers");
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].host_id, laptop.store().device_id());
        assert!(
            phone
                .admin()
                .sync_conflicts()
                .await
                .expect("conflicts")
                .is_empty()
        );

        // Pointed at itself: refused before the lock, as the batch's own fault.
        let own = laptop
            .admin()
            .exchange_sync_batch(&batch, Uuid::from_u128(3), at(4))
            .await;
        assert!(
            matches!(
                own,
                Err(ConfirmError::Store(StoreError::Sync(
                    SyncError::FromThisHost { .. }
                )))
            ),
            "{own:?}"
        );
        let own_batch = SyncBatch {
            batch_id: Uuid::from_u128(9),
            from_host: phone.store().device_id().to_owned(),
            ..batch.clone()
        };
        assert!(matches!(
            phone.admin().import_sync_batch(&own_batch, at(4)).await,
            Err(ConfirmError::Store(StoreError::Sync(_)))
        ));
        let mut conn = phone.store().read_connection().await.expect("connection");
        let log = sync::imports(&mut conn, 10).await.expect("imports");
        drop(conn);
        assert_eq!(
            (log[0].batch_id, log[0].outcome),
            (Uuid::from_u128(9), sync::ImportOutcome::Refused),
            "the refusal is recorded"
        );

        // A round trip with a peer: claim, exchange there, merge the answer here.
        let export = laptop
            .admin()
            .claim_sync_export(Uuid::from_u128(4), at(5), time::Duration::minutes(1))
            .await
            .expect("claimed");
        let (there, answer) = phone
            .admin()
            .exchange_sync_batch(&export.batch, Uuid::from_u128(5), at(6))
            .await
            .expect("exchanged");
        assert_eq!(there.batch_id, Uuid::from_u128(4));
        assert_eq!(answer.from_host, phone.store().device_id());
        let here = laptop
            .admin()
            .merge_peer_batch(&export, &answer, at(7))
            .await
            .expect("merged");
        assert_eq!(here.from_host, phone.store().device_id());
        let unsent = laptop
            .admin()
            .claim_sync_export(Uuid::from_u128(6), at(8), time::Duration::minutes(1))
            .await
            .expect("claimed");
        laptop
            .admin()
            .release_sync_export(&unsent)
            .await
            .expect("released");
    }
}
