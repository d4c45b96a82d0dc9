//! One decoder per stored type for both ways the store reads a row: sqlx's `AnyRow`
//! (PostgreSQL, and SQLite outside the hot paths) and rusqlite's `Row` (SQLite's C API,
//! see `c_api`), so a read through the C API decodes exactly as the same read through
//! sqlx.

use crate::StoreError;
use sqlx::Row as _;
use sqlx::any::AnyRow;

/// A column type the store decodes, from either kind of row.
pub(crate) trait Column: Sized {
    fn from_any(row: &AnyRow, name: &str) -> Result<Self, sqlx::Error>;
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &rusqlite::Row<'_>, name: &str) -> Result<Self, rusqlite::Error>;
}

macro_rules! columns {
    ($($type:ty),*) => {$(
        impl Column for $type {
            fn from_any(row: &AnyRow, name: &str) -> Result<Self, sqlx::Error> {
                row.try_get(name)
            }
            #[cfg(feature = "sqlite")]
            fn from_sqlite(row: &rusqlite::Row<'_>, name: &str) -> Result<Self, rusqlite::Error> {
                row.get(name)
            }
        }
    )*};
}

columns!(String, Option<String>, i64, Option<i64>);

/// A row read by the store, by column name.
pub(crate) trait StoreRow {
    fn value<T: Column>(&self, name: &str) -> Result<T, StoreError>;
}

impl StoreRow for AnyRow {
    fn value<T: Column>(&self, name: &str) -> Result<T, StoreError> {
        Ok(T::from_any(self, name)?)
    }
}

#[cfg(feature = "sqlite")]
impl StoreRow for rusqlite::Row<'_> {
    fn value<T: Column>(&self, name: &str) -> Result<T, StoreError> {
        Ok(T::from_sqlite(self, name)?)
    }
}

/// A statement parameter the store binds the same way through sqlx and the C API.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

/// `query` with `params` bound in order.
pub(crate) fn bind_all<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    params: &[Param<'q>],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for param in params {
        query = match *param {
            Param::Text(text) => query.bind(text),
            Param::Int(number) => query.bind(number),
        };
    }
    query
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match *self {
            Param::Text(text) => text.to_sql(),
            Param::Int(number) => Ok(rusqlite::types::ToSqlOutput::from(number)),
        }
    }
}
