//! Shared support for the integration tests (none yet).
