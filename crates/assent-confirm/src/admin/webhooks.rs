//! Webhook subscriptions and their deliveries: added (the signing secret given by the
//! caller, shown once), listed (a secret URL masked), removed, delivered again; and an
//! event queued for the subscriptions that want it. The sending is the webhook
//! worker's (`assent-webhooks`), outside any transaction.

use crate::{Admin, ConfirmError};
use assent_store::webhooks::{self, Delivery, NewEvent, NewSubscription, Subscription};
use time::OffsetDateTime;
use uuid::Uuid;

impl Admin<'_> {
    /// Every webhook subscription, without its secret (a Slack URL masked, any other
    /// URL's credentials redacted).
    pub async fn webhook_subscriptions(&self) -> Result<Vec<Subscription>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(webhooks::subscriptions(&mut conn).await?)
    }

    /// Adds subscription `new` (its URL, events and format checked by the door with
    /// `assent-webhooks`' validators), in one transaction; returns it as listed.
    #[tracing::instrument(skip(self, new), fields(format = %new.format))]
    pub async fn add_webhook_subscription(
        &self,
        new: &NewSubscription,
        now: OffsetDateTime,
    ) -> Result<Subscription, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let added = webhooks::insert_subscription(tx.connection(), new, now).await?;
        tx.commit().await?;
        Ok(added)
    }

    /// Removes subscription `id` and its undelivered deliveries, in one transaction;
    /// `false` when there was none.
    #[tracing::instrument(skip(self))]
    pub async fn remove_webhook_subscription(&self, id: Uuid) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let removed = webhooks::remove_subscription(tx.connection(), id).await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// The deliveries, newest first, at most `limit` (only the dead-lettered ones with
    /// `failed`).
    pub async fn webhook_deliveries(
        &self,
        failed: bool,
        limit: u32,
    ) -> Result<Vec<Delivery>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(webhooks::deliveries(&mut conn, failed, limit).await?)
    }

    /// Queues delivery `id` again, due `now`, in one transaction; `false` when there
    /// is no such delivery.
    #[tracing::instrument(skip(self))]
    pub async fn redeliver_webhook(
        &self,
        id: i64,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let queued = webhooks::redeliver(tx.connection(), id, now).await?;
        tx.commit().await?;
        Ok(queued)
    }

    /// Queues event `event` for the subscriptions that want it, in one transaction of
    /// its own: for an event no write of the engine's causes (a sub-agent's
    /// `confirmation.requested`, which exists only on a server's bus). Returns the
    /// event's id, `None` when no subscription wants it (nothing is written then).
    #[tracing::instrument(skip(self, event), fields(event = event.event_type))]
    pub async fn queue_webhook_event(
        &self,
        event: NewEvent<'_>,
        now: OffsetDateTime,
    ) -> Result<Option<String>, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let id = webhooks::enqueue_event(tx.connection(), event, now).await?;
        tx.commit().await?;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_store::webhooks::event;
    use serde_json::json;

    #[tokio::test]
    async fn a_subscription_is_added_listed_sent_an_event_and_removed() {
        let engine = crate::testing::bare_engine().await;
        let now = time::macros::datetime!(2026-11-23 10:00 UTC);
        let new = NewSubscription {
            url: "https://receiver.example/hook?token=s3cret".to_owned(),
            events: vec![event::CONFIRMATION_REQUESTED.to_owned()],
            format: "standard".to_owned(),
            agent_id: None,
            secret: "whsec_test".to_owned(),
        };
        let added = engine
            .admin()
            .add_webhook_subscription(&new, now)
            .await
            .expect("added");
        assert_eq!(added.url, "https://receiver.example/hook?token=…");
        assert_eq!(
            engine.admin().webhook_subscriptions().await.expect("list"),
            std::slice::from_ref(&added)
        );
        let unwanted = NewEvent {
            event_type: event::ITEM_FAILED,
            agent_id: None,
            change_set_id: None,
            data: json!({}),
        };
        assert_eq!(
            engine
                .admin()
                .queue_webhook_event(unwanted, now)
                .await
                .expect("queued"),
            None
        );
        let wanted = NewEvent {
            event_type: event::CONFIRMATION_REQUESTED,
            agent_id: Some("triage"),
            change_set_id: None,
            data: json!({"correlationId": "c1"}),
        };
        assert!(
            engine
                .admin()
                .queue_webhook_event(wanted, now)
                .await
                .expect("queued")
                .is_some()
        );
        let deliveries = engine
            .admin()
            .webhook_deliveries(false, 10)
            .await
            .expect("list");
        assert_eq!(deliveries.len(), 1);
        assert!(
            engine
                .admin()
                .webhook_deliveries(true, 10)
                .await
                .expect("list")
                .is_empty()
        );
        assert!(
            engine
                .admin()
                .redeliver_webhook(deliveries[0].id, now)
                .await
                .expect("again")
        );
        assert!(
            !engine
                .admin()
                .redeliver_webhook(-1, now)
                .await
                .expect("none")
        );
        assert!(
            engine
                .admin()
                .remove_webhook_subscription(added.id)
                .await
                .expect("removed")
        );
        assert!(
            !engine
                .admin()
                .remove_webhook_subscription(added.id)
                .await
                .expect("gone")
        );
        assert!(
            engine
                .admin()
                .webhook_subscriptions()
                .await
                .expect("list")
                .is_empty()
        );
    }
}
