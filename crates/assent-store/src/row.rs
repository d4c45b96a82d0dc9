//! One decoder per stored type for both ways the store reads a row: sqlx's `AnyRow`
//! (PostgreSQL, and SQLite outside the hot paths) and rusqlite's `Row` (SQLite's C API,
//! see `c_api`), so a read through the C API decodes exactly as the same read through
//! sqlx.

use crate::StoreError;
#[cfg(feature = "sqlite")]
use crate::error::SqliteResult;
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
        T::from_sqlite(self, name).or_store()
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

/// An owned statement parameter, typed even when NULL (PostgreSQL checks a NULL's type
/// against its column's).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Text(String),
    Int(i64),
    NullText,
    NullInt,
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<&String> for Value {
    fn from(text: &String) -> Self {
        Self::Text(text.clone())
    }
}

impl From<i64> for Value {
    fn from(number: i64) -> Self {
        Self::Int(number)
    }
}

impl From<Option<String>> for Value {
    fn from(text: Option<String>) -> Self {
        text.map_or(Self::NullText, Self::Text)
    }
}

impl From<Option<&str>> for Value {
    fn from(text: Option<&str>) -> Self {
        text.map_or(Self::NullText, |t| Self::Text(t.to_owned()))
    }
}

impl From<Option<i64>> for Value {
    fn from(number: Option<i64>) -> Self {
        number.map_or(Self::NullInt, Self::Int)
    }
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self {
            Self::Text(text) => ToSqlOutput::from(text.as_str()),
            Self::Int(number) => ToSqlOutput::from(*number),
            Self::NullText | Self::NullInt => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

/// A statement with its parameters, built once and run through sqlx or, on SQLite,
/// through the C API (issue 55): what a write plan is made of.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    sql: String,
    params: Vec<Value>,
}

impl Statement {
    /// `sql` holds only placeholders (`$1`…), never a value: every value is bound.
    pub(crate) fn new(sql: String) -> Self {
        Self {
            sql,
            params: Vec::new(),
        }
    }

    pub(crate) fn bind(mut self, value: impl Into<Value>) -> Self {
        self.params.push(value.into());
        self
    }

    /// Its SQL and its values, to build another statement from.
    pub(crate) fn into_parts(self) -> (String, Vec<Value>) {
        (self.sql, self.params)
    }

    /// Its parameters, in order (a test compares two ways of building one write).
    #[cfg(test)]
    pub(crate) fn params(&self) -> &[Value] {
        &self.params
    }

    /// The statement as an sqlx query.
    pub(crate) fn query(&self) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments> {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(self.sql.clone()));
        for value in &self.params {
            query = match value {
                Value::Text(text) => query.bind(text.as_str()),
                Value::Int(number) => query.bind(*number),
                Value::NullText => query.bind(None::<String>),
                Value::NullInt => query.bind(None::<i64>),
            };
        }
        query
    }

    /// Runs the statement through the C API.
    #[cfg(feature = "sqlite")]
    pub(crate) fn execute(&self, c: &crate::c_api::CApi<'_>) -> Result<usize, StoreError> {
        c.bound(&self.sql, &self.params)?.raw_execute().or_store()
    }

    /// Runs the statement through the C API, returning its rows' first column.
    #[cfg(feature = "sqlite")]
    pub(crate) fn fetch_ints(&self, c: &crate::c_api::CApi<'_>) -> Result<Vec<i64>, StoreError> {
        let mut statement = c.bound(&self.sql, &self.params)?;
        let mut rows = statement.raw_query();
        let mut ints = Vec::new();
        while let Some(row) = rows.next().or_store()? {
            ints.push(row.get(0).or_store()?);
        }
        Ok(ints)
    }
}

/// The type of one column of an [`Unnest`] statement: its array's cast in the SQL
/// (`$n::text[]`, `$n::bigint[]`).
#[cfg(feature = "postgres")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArrayType {
    Text,
    Int,
}

/// One column's values of an [`Unnest`] statement, NULLs included.
#[cfg(feature = "postgres")]
#[derive(Debug, Clone, PartialEq)]
enum Array {
    Text(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
}

/// A PostgreSQL write of many rows bound column by column, one array per column
/// (`INSERT … SELECT … FROM UNNEST($2::text[], $3::bigint[], …)`).
///
/// Why: a multi-row `VALUES` list is a statement text of its own per row count, so
/// PostgreSQL parses and plans it again for every count and sqlx's statement cache
/// fills with them (a decision of 1 row, confirm-all of 20, a wake of 25); with
/// arrays the text is one whatever the count, prepared once per connection (issue
/// 55). SQLite has no arrays and keeps its `VALUES` lists ([`Statement`]).
///
/// The SQL is a constant: its scalar parameters first (`$1`… , [`Self::new`]'s
/// `scalars`), then one array per column in the order of `columns`, cast to that
/// column's type ([`assert_unnest_casts`] checks a statement's casts in its tests).
#[cfg(feature = "postgres")]
#[derive(Debug, Clone)]
pub(crate) struct Unnest {
    sql: &'static str,
    table: &'static str,
    scalars: Vec<Value>,
    arrays: Vec<Array>,
    rows: usize,
}

#[cfg(feature = "postgres")]
impl Unnest {
    /// An empty write of `table` with `sql`, its scalars bound first.
    pub(crate) fn new(
        sql: &'static str,
        table: &'static str,
        scalars: Vec<Value>,
        columns: &[ArrayType],
    ) -> Self {
        let arrays = columns
            .iter()
            .map(|column| match column {
                ArrayType::Text => Array::Text(Vec::new()),
                ArrayType::Int => Array::Int(Vec::new()),
            })
            .collect();
        Self {
            sql,
            table,
            scalars,
            arrays,
            rows: 0,
        }
    }

    /// Adds a row: one value per column, each of its column's type (a NULL of either
    /// type goes into either column; a text in an integer column is an error, not a
    /// guess).
    pub(crate) fn row(&mut self, values: Vec<Value>) -> Result<(), StoreError> {
        let mismatch = |reason: String| StoreError::corrupt(self.table, reason);
        if values.len() != self.arrays.len() {
            return Err(mismatch(format!(
                "a row of {} values for {} columns",
                values.len(),
                self.arrays.len()
            )));
        }
        // Checked before anything is pushed, so a refused row leaves the arrays even.
        let fits = |(value, array): (&Value, &Array)| {
            matches!(
                (value, array),
                (
                    Value::Text(_) | Value::NullText | Value::NullInt,
                    Array::Text(_)
                ) | (
                    Value::Int(_) | Value::NullInt | Value::NullText,
                    Array::Int(_)
                )
            )
        };
        if let Some(column) = values.iter().zip(&self.arrays).position(|pair| !fits(pair)) {
            return Err(mismatch(format!(
                "column {} of an array insert given {:?}",
                column + 1,
                values[column]
            )));
        }
        for (value, array) in values.into_iter().zip(&mut self.arrays) {
            match (value, array) {
                (Value::Text(text), Array::Text(texts)) => texts.push(Some(text)),
                (Value::Int(number), Array::Int(numbers)) => numbers.push(Some(number)),
                (_, Array::Text(texts)) => texts.push(None),
                (_, Array::Int(numbers)) => numbers.push(None),
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Whether it has no row (and so need not run).
    pub(crate) fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The statement as a native PostgreSQL query: its scalars, then its arrays.
    pub(crate) fn query(
        &self,
    ) -> sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let mut query = sqlx::query(self.sql);
        for value in &self.scalars {
            query = match value {
                Value::Text(text) => query.bind(text.as_str()),
                Value::Int(number) => query.bind(*number),
                Value::NullText => query.bind(None::<String>),
                Value::NullInt => query.bind(None::<i64>),
            };
        }
        for array in &self.arrays {
            query = match array {
                Array::Text(texts) => query.bind(texts.as_slice()),
                Array::Int(numbers) => query.bind(numbers.as_slice()),
            };
        }
        query
    }
}

/// Asserts that `sql` casts `$scalars+1`… to the arrays `columns` in order, and
/// names no parameter past them (a module's test of its [`Unnest`] statement).
#[cfg(all(test, feature = "postgres"))]
pub(crate) fn assert_unnest_casts(sql: &str, scalars: usize, columns: &[ArrayType]) {
    for (n, column) in (scalars + 1..).zip(columns) {
        let cast = match column {
            ArrayType::Text => format!("${n}::text[]"),
            ArrayType::Int => format!("${n}::bigint[]"),
        };
        assert!(sql.contains(&cast), "{sql} lacks {cast}");
    }
    let past = format!("${}", scalars + columns.len() + 1);
    assert!(!sql.contains(&past), "{sql} names {past}");
    for n in 1..=scalars {
        assert!(sql.contains(&format!("${n}")), "{sql} lacks ${n}");
    }
}
