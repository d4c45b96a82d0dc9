//! The one integration test binary of Assent: cross-crate scenarios against a real
//! SQLite file per test, and the conformance suite that runs on PostgreSQL too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod concurrency;
mod confirmation;
mod conformance;
mod consent;
mod decided_by;
mod delegation;
mod elsewhere;
mod executor;
mod four_doors;
mod history_rules;
mod hold;
mod hold_sync;
mod ledger;
mod matrix;
mod outbox;
mod outcome;
mod own_transaction;
mod proof;
mod properties;
mod rejections;
mod review;
mod service_pool;
mod session_ended;
mod shadow;
mod stale;
mod stored_results;
mod sync;
mod trust;
mod undo;
mod upgrade;
mod wake;
mod webhooks;
