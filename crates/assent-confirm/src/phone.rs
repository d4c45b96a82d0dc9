//! The phone doors through the engine ([`Engine::phone`]): the channels of `assent
//! notify` (ntfy topics, email addresses, each with the person its links answer as),
//! and the one-time answer links their messages carry (`/api/answer/{token}`).
//!
//! A link decides through the confirmation service, as every door does, as its
//! channel's person (`ntfy:n1a2b3c4d (alice)`, one person with alice in Slack or on the
//! command line), bound to the revision its message showed; the link is marked used in
//! the decision's own write transaction, so a decision and its link's use stand or fall
//! together, and a refused one leaves the link as it was.

use crate::{ConfirmError, Engine, ItemRef};
use assent_domain::{ChangeItem, ChangeSet, OffsetDateTime, Verdict, format_time, one_line};
pub use assent_store::phone::{AnswerLink, Channel, ChannelKind, LinkAction};
use assent_store::{change_sets, decisions, phone};

/// The phone doors of one engine.
#[derive(Clone)]
pub struct Phone {
    engine: Engine,
}

impl Engine {
    /// The phone doors: channels and one-time answer links.
    pub fn phone(&self) -> Phone {
        Phone {
            engine: self.clone(),
        }
    }
}

/// Where a link stands.
#[derive(Debug, Clone)]
pub enum LinkState {
    /// It may decide: the link, and the item as its message showed it.
    Open {
        /// The link.
        link: AnswerLink,
        /// The item's agent.
        agent_id: String,
        /// The item.
        item: Box<ChangeItem>,
    },
    /// No link has this token (guessed, or its channel was removed).
    Unknown,
    /// It was used at this moment.
    Used(OffsetDateTime),
    /// The agent stopped waiting at this moment.
    Expired(OffsetDateTime),
    /// The item was decided (elsewhere): what, by whom, when.
    Decided {
        /// The verdict.
        verdict: Option<Verdict>,
        /// Who decided.
        by: Option<String>,
        /// When.
        at: Option<OffsetDateTime>,
    },
    /// The item changed since the link was sent.
    Moved {
        /// The revision the message showed.
        shown: u32,
        /// The item's revision now.
        now: u32,
    },
}

impl LinkState {
    /// What a person is told when the link cannot decide; `None` when it may.
    pub fn refusal(&self) -> Option<String> {
        Some(match self {
            Self::Open { .. } => return None,
            Self::Unknown => {
                "This link answers nothing: it is unknown or its channel was removed".to_owned()
            }
            Self::Used(at) => format!(
                "This link was used at {}: it works once, nothing more was decided",
                format_time(*at)
            ),
            Self::Expired(at) => format!(
                "too late: the agent stopped waiting at {}; nothing was decided",
                format_time(*at)
            ),
            Self::Decided { verdict, by, at } => format!(
                "Already decided elsewhere{}: this link changed nothing",
                match (verdict, by, at) {
                    (Some(verdict), by, Some(at)) => format!(
                        " ({verdict} by {} at {})",
                        one_line(by.as_deref().unwrap_or("someone")),
                        format_time(*at)
                    ),
                    _ => String::new(),
                }
            ),
            Self::Moved { shown, now } => format!(
                "The call changed since this link was sent (revision {shown} then, {now} now): nothing was decided, look at it on the page"
            ),
        })
    }
}

/// What a tap on a link came to.
#[derive(Debug, Clone)]
pub enum LinkAnswer {
    /// Decided: what the person is told.
    Decided(String),
    /// Nothing was decided, and why (see [`LinkState::refusal`]).
    Refused(LinkState),
}

impl Phone {
    /// Adds a channel of `kind` at `address` whose links answer as `person`, with its
    /// secret (the ntfy access token, the SMTP URL); items queued from `now` on are sent
    /// to it.
    pub async fn add_channel(
        &self,
        kind: ChannelKind,
        address: &str,
        person: &str,
        secret: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Channel, ConfirmError> {
        // The id's last 8 hex digits: random from the default source, distinct from a
        // sequential one.
        let id = format!(
            "n{}",
            &self.engine.inputs.ids.new_id().simple().to_string()[24..]
        );
        let channel = Channel {
            id,
            kind,
            address: address.to_owned(),
            person: person.to_owned(),
            created_at: now,
        };
        let mut tx = self.engine.store.begin_write().await?;
        phone::add_channel(tx.connection(), &channel, secret).await?;
        tx.commit().await?;
        Ok(channel)
    }

    /// Removes channel `id` (its unused links stop working); `false` when there was none.
    pub async fn remove_channel(&self, id: &str) -> Result<bool, ConfirmError> {
        let mut tx = self.engine.store.begin_write().await?;
        let removed = phone::remove_channel(tx.connection(), id).await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// Every channel, without secrets.
    pub async fn channels(&self) -> Result<Vec<Channel>, ConfirmError> {
        let mut conn = self.engine.store.read_connection().await?;
        Ok(phone::channels(&mut conn).await?)
    }

    /// Where the link of `token` stands at `now`; nothing is decided.
    pub async fn check_link(
        &self,
        token: &str,
        now: OffsetDateTime,
    ) -> Result<LinkState, ConfirmError> {
        // A token is 64 hex digits: anything else is not looked up at all.
        if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(LinkState::Unknown);
        }
        let mut conn = self.engine.store.read_connection().await?;
        let Some(link) = phone::link(&mut conn, &phone::token_hash(token)).await? else {
            return Ok(LinkState::Unknown);
        };
        if let Some(used) = link.used_at {
            return Ok(LinkState::Used(used));
        }
        if now >= link.expires_at {
            return Ok(LinkState::Expired(link.expires_at));
        }
        let Some(set) = change_sets::load(&mut conn, link.change_set_id).await? else {
            return Ok(LinkState::Unknown);
        };
        let Some(item) = set.items.get(link.item_index) else {
            return Ok(LinkState::Unknown);
        };
        if !item.status.is_open() {
            let decided = decisions::for_change_set(&mut conn, set.id).await?;
            let last = decided
                .iter()
                .rev()
                .find(|d| d.item_index == link.item_index);
            return Ok(LinkState::Decided {
                verdict: last.map(|d| d.verdict),
                by: last.and_then(|d| d.decided_by.clone()),
                at: last.map(|d| d.created_at),
            });
        }
        if item.revision != link.revision {
            return Ok(LinkState::Moved {
                shown: link.revision,
                now: item.revision,
            });
        }
        Ok(open(link, &set, item))
    }

    /// Decides what the link of `token` names (`reason` goes with a rejection), in one
    /// write transaction with the mark that uses the link up. An engine's refusal (the
    /// revision moved, a policy) is the error, and nothing of it stays.
    pub async fn answer_link(
        &self,
        token: &str,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> Result<LinkAnswer, ConfirmError> {
        let state = self.check_link(token, now).await?;
        let LinkState::Open { link, .. } = state else {
            return Ok(LinkAnswer::Refused(state));
        };
        let mut conn = self.engine.store.read_connection().await?;
        let Some(channel) = phone::channel(&mut conn, &link.channel_id).await? else {
            return Ok(LinkAnswer::Refused(LinkState::Unknown));
        };
        drop(conn);
        let by = assent_domain::phone_reviewer(channel.kind.as_str(), &channel.id, &link.person);
        let service = self
            .engine
            .confirmations()
            .by(by.clone())
            .shown_revision(link.revision);
        let item = ItemRef::new(link.change_set_id, link.item_index);
        let mut tx = self.engine.store.begin_write().await?;
        if !phone::use_link(tx.connection(), &phone::token_hash(token), now).await? {
            tx.rollback().await?;
            // Used or expired between the check and the lock.
            return Ok(LinkAnswer::Refused(if now >= link.expires_at {
                LinkState::Expired(link.expires_at)
            } else {
                LinkState::Used(now)
            }));
        }
        let said = match link.action {
            LinkAction::Approve => service
                .confirm_item_in(&mut tx, item, now)
                .await
                .map(|outcome| format!("Approved as {by}: {}", one_line(&outcome.message()))),
            LinkAction::Reject => service
                .reject_item_in(&mut tx, item, reason, now)
                .await
                .map(|decision| format!("{} as {by}", decision.verdict)),
        };
        match said {
            Ok(said) => {
                tx.commit().await?;
                tracing::info!(%by, set = %link.change_set_id, index = link.item_index, "answered by a one-time link");
                Ok(LinkAnswer::Decided(said))
            }
            Err(error) => {
                tx.rollback().await?;
                Err(error)
            }
        }
    }
}

fn open(link: AnswerLink, set: &ChangeSet, item: &ChangeItem) -> LinkState {
    LinkState::Open {
        link,
        agent_id: set.agent_id.clone(),
        item: Box::new(item.clone()),
    }
}
