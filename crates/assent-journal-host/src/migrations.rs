//! The journal's own tables, as the host's migrations: the engine creates only its own
//! tables, and a database gets the journal's when the journal host is composed over it
//! (`Store::migrate_host("journal", MIGRATIONS)`).

use assent_store::HostMigration;

/// The journal host's migrations, oldest first. Migration 1 is engine migration 0002
/// with `IF NOT EXISTS` everywhere: databases of the releases that ran 0002 already have
/// these tables and keep them as they are.
pub const MIGRATIONS: &[HostMigration] = &[HostMigration {
    version: 1,
    description: "tasks",
    sqlite: include_str!("../migrations/sqlite/0001_tasks.sql"),
    postgres: include_str!("../migrations/postgres/0001_tasks.sql"),
}];
