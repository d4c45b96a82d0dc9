//! A cancellation token: how a scheduler tells a waiting confirmation to stop.
//!
//! Our own dozen lines over `tokio::sync::watch` instead of `tokio-util`'s token: the
//! engine needs only "cancel" and "wait until cancelled", and a whole crate (and its
//! compile time on a shared two-core machine) is not worth that.

use std::sync::Arc;
use tokio::sync::watch;

/// Cancels every wait that holds a clone of it. Cloning shares the token.
#[derive(Debug, Clone)]
pub struct CancellationToken {
    sender: Arc<watch::Sender<bool>>,
}

impl Default for CancellationToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancellationToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self {
            sender: Arc::new(watch::Sender::new(false)),
        }
    }

    /// Cancels it; waits on it end with `Cancelled`. Idempotent.
    pub fn cancel(&self) {
        self.sender.send_replace(true);
    }

    /// Whether it has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.sender.borrow()
    }

    /// Completes once the token is cancelled (at once when it already is).
    pub async fn cancelled(&self) {
        let mut receiver = self.sender.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail: it only ends
        // when the flag turns true.
        let _ = receiver.wait_for(|cancelled| *cancelled).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancel_wakes_every_clone_and_stays_cancelled() {
        let token = CancellationToken::new();
        let clone = token.clone();
        let waiter = tokio::spawn(async move { clone.cancelled().await });
        assert!(!token.is_cancelled());
        token.cancel();
        waiter.await.expect("waiter finishes");
        assert!(token.is_cancelled());
        // Already cancelled: returns at once.
        token.cancelled().await;
    }
}
