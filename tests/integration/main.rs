//! The one integration test binary of Assent: cross-crate scenarios against a real
//! SQLite file per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod concurrency;
mod confirmation;
mod delegation;
mod executor;
mod outbox;
mod properties;
mod sync;
mod wake;
