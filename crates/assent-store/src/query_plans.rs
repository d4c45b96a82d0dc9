//! The store's hot reads use the indexes made for them: `EXPLAIN QUERY PLAN` of the
//! exact SQL of `change_sets`, `decisions` and `audit`, checked against the intended
//! index, for the absence of full table scans and, where the rows come from a big
//! table, of a full sort. The history reads (open sets, an agent's recent decisions
//! about a target, its undo sets) are answered from their index alone: their plan must
//! say `USING COVERING INDEX` (migration 0027), so a column added to their `SELECT` and
//! not to the index fails here.
//!
//! This backs "pending sets of a target and recent decisions of an agent (and target) stay
//! fast with a million rows" without timing anything: a plan that searches a
//! (partial) index reads the matching rows only, whatever the table's size. The store
//! never runs `ANALYZE`, so SQLite plans from its fixed defaults and the plan on an
//! empty database is the plan on a full one.
//!
//! The SQL is copied, fragment by fragment, from the modules that run it;
//! `the_copied_sql_is_what_the_store_runs` fails when a copy drifts from its source.

use crate::Store;
use sqlx::Row;

/// The open-set predicate of the partial indexes (`open_sets!` in `change_sets.rs`).
const OPEN: &str = "status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL";

const CHANGE_SETS_RS: &str = include_str!("change_sets.rs");
const DECISIONS_RS: &str = include_str!("decisions.rs");
const AUDIT_RS: &str = include_str!("audit.rs");
const MIGRATION: &str = include_str!("../../../migrations/sqlite/0001_engine.sql");
const COVERING_MIGRATION: &str =
    include_str!("../../../migrations/sqlite/0027_covering_history_reads.sql");

/// The columns the set reads name (`set_columns!` in `change_sets.rs`).
const SET_COLUMNS: &str = "id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at, vector_clock";
/// The columns the decision reads name (`decision_columns!` in `decisions.rs`).
const DECISION_COLUMNS: &str = "id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason, edited_args, human_summary, args, created_at, vector_clock, decided_by";

/// One hot read of the store.
struct Case {
    name: &'static str,
    /// The source file that runs it.
    source: &'static str,
    /// Its SQL, as the pieces the source spells it in (`concat!` of `open_sets!()`
    /// and a filter, or one literal).
    sql: &'static [&'static str],
    /// Values for its parameters, in order.
    binds: &'static [Bind],
    /// The table the rows come from.
    table: &'static str,
    /// The index the plan must search.
    index: &'static str,
    /// Whether the index alone answers the query (`USING COVERING INDEX`): it holds
    /// every column the query names, so no row of the table is read.
    covering: bool,
    /// Whether the plan may sort all its rows (`USE TEMP B-TREE FOR ORDER BY`): only
    /// when they are a bounded subquery's. Sorting ties of an index order (`... FOR
    /// LAST TERM OF ORDER BY`) is always fine: the index still delivers rows in order
    /// and a `LIMIT` stops the search early.
    full_sort_allowed: bool,
}

#[derive(Clone, Copy)]
enum Bind {
    Text(&'static str),
    Int(i64),
}

const CASES: &[Case] = &[
    Case {
        name: "pending sets by target",
        source: CHANGE_SETS_RS,
        sql: &[
            "SELECT ",
            SET_COLUMNS,
            " FROM change_sets WHERE ",
            OPEN,
            " AND target_kind = $1 AND target_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3",
        ],
        binds: &[Bind::Text("task"), Bind::Text("task-1"), Bind::Int(-1)],
        table: "change_sets",
        index: "change_sets_open_by_target_covering",
        covering: true,
        full_sort_allowed: false,
    },
    Case {
        name: "pending sets by agent",
        source: CHANGE_SETS_RS,
        sql: &[
            "SELECT ",
            SET_COLUMNS,
            " FROM change_sets WHERE ",
            OPEN,
            " AND agent_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        ],
        binds: &[Bind::Text("agent-1"), Bind::Int(-1)],
        table: "change_sets",
        index: "change_sets_open_by_agent_covering",
        covering: true,
        full_sort_allowed: false,
    },
    Case {
        name: "pending sets by target and agent",
        source: CHANGE_SETS_RS,
        sql: &[
            "SELECT ",
            SET_COLUMNS,
            " FROM change_sets WHERE ",
            OPEN,
            " AND target_kind = $1 AND target_id = $2 AND agent_id || '' = $3",
            " ORDER BY created_at DESC, id DESC LIMIT $4",
        ],
        binds: &[
            Bind::Text("task"),
            Bind::Text("task-1"),
            Bind::Text("agent-1"),
            Bind::Int(-1),
        ],
        table: "change_sets",
        // A target has few open sets, an agent may have many across its targets; the unary
        // `+` keeps SQLite from choosing the agent's index on a cost tie.
        index: "change_sets_open_by_target_covering",
        covering: true,
        full_sort_allowed: false,
    },
    Case {
        name: "expiry scan",
        source: CHANGE_SETS_RS,
        sql: &["SELECT id FROM change_sets
         WHERE status IN ('pending', 'partiallyResolved') AND deleted_at IS NULL AND created_at < $1
         ORDER BY created_at"],
        binds: &[Bind::Text("2026-03-01T12:00:00.000000Z")],
        table: "change_sets",
        index: "change_sets_open_by_age",
        covering: false,
        full_sort_allowed: false,
    },
    Case {
        name: "recent decisions by agent",
        source: DECISIONS_RS,
        sql: &[
            "SELECT ",
            DECISION_COLUMNS,
            " FROM decisions WHERE agent_id = $1 ORDER BY created_at DESC, rowid DESC LIMIT $2",
        ],
        binds: &[Bind::Text("agent-1"), Bind::Int(200)],
        table: "decisions",
        index: "decisions_recent_by_agent",
        covering: false,
        full_sort_allowed: false,
    },
    Case {
        name: "recent decisions by agent and target",
        source: DECISIONS_RS,
        sql: &[
            "SELECT ",
            DECISION_COLUMNS,
            " FROM decisions WHERE agent_id = $1 AND target_kind = $2 AND target_id = $3
                 ORDER BY created_at DESC, rowid DESC LIMIT $4",
        ],
        binds: &[
            Bind::Text("agent-1"),
            Bind::Text("task"),
            Bind::Text("task-1"),
            Bind::Int(200),
        ],
        table: "decisions",
        index: "decisions_recent_by_agent_target_covering",
        covering: true,
        full_sort_allowed: false,
    },
    Case {
        name: "decisions of a set",
        source: DECISIONS_RS,
        sql: &[
            "SELECT ",
            DECISION_COLUMNS,
            " FROM decisions WHERE change_set_id = $1 ORDER BY created_at, rowid",
        ],
        binds: &[Bind::Text("set-1")],
        table: "decisions",
        index: "decisions_by_change_set",
        covering: false,
        full_sort_allowed: false,
    },
    Case {
        name: "undo sets of an agent",
        source: CHANGE_SETS_RS,
        sql: &["SELECT s.undoes FROM change_sets s
         JOIN change_items i ON i.change_set_id = s.id AND i.item_index = 0
         WHERE s.agent_id = $1 AND s.undoes IS NOT NULL AND i.status = 'confirmed'"],
        binds: &[Bind::Text("agent-1")],
        // SQLite's plan names a table by its alias.
        table: "s",
        index: "change_sets_undoing_covering",
        covering: true,
        full_sort_allowed: false,
    },
    Case {
        name: "audit by target",
        source: AUDIT_RS,
        sql: &[
            "SELECT * FROM (SELECT * FROM audit_records WHERE target_kind = $1 AND target_id = $2 ORDER BY id DESC LIMIT $3) AS recent ORDER BY id",
        ],
        binds: &[Bind::Text("task"), Bind::Text("task-1"), Bind::Int(100)],
        table: "audit_records",
        index: "audit_records_by_target",
        covering: false,
        // The outer query re-sorts the at most `limit` rows of the subquery.
        full_sort_allowed: true,
    },
    Case {
        name: "audit by run",
        source: AUDIT_RS,
        sql: &[
            "SELECT * FROM (SELECT * FROM audit_records WHERE run_key = $1 ORDER BY id DESC LIMIT $2) AS recent ORDER BY id",
        ],
        binds: &[Bind::Text("run-1"), Bind::Int(100)],
        table: "audit_records",
        index: "audit_records_by_run",
        covering: false,
        full_sort_allowed: true,
    },
];

/// `text` with every run of whitespace made one space, so SQL split over source lines
/// compares equal to the same SQL on one line.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `detail` column of `EXPLAIN QUERY PLAN <sql>`, one line per plan step.
async fn plan(store: &Store, case: &Case) -> Vec<String> {
    let explain = format!("EXPLAIN QUERY PLAN {}", case.sql.concat());
    let mut query = sqlx::query(sqlx::AssertSqlSafe(explain));
    for bind in case.binds {
        query = match *bind {
            Bind::Text(text) => query.bind(text),
            Bind::Int(n) => query.bind(n),
        };
    }
    let rows = query
        .fetch_all(
            store
                .read_connection()
                .await
                .expect("a connection")
                .connection(),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: EXPLAIN QUERY PLAN failed: {e}", case.name));
    // The rows are (id, parent, notused, detail).
    rows.iter()
        .map(|row| row.try_get("detail").expect("a detail column"))
        .collect()
}

/// What is wrong with `steps` as the plan of `case`.
fn problems(case: &Case, steps: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let kind = if case.covering {
        "COVERING INDEX"
    } else {
        "INDEX"
    };
    let search = format!("SEARCH {} USING {kind} {} (", case.table, case.index);
    if !steps.iter().any(|s| s.starts_with(&search)) {
        found.push(format!("no step starts with {search:?}"));
    }
    for step in steps {
        // `SCAN t` reads the whole table, `SCAN t USING [COVERING] INDEX i` the whole
        // index; `SCAN (subquery-1)` only reads a subquery's rows.
        let scans_a_table = [
            "change_sets",
            "change_items",
            "decisions",
            "audit_records",
            case.table,
        ]
        .iter()
        .any(|t| step.starts_with(&format!("SCAN {t}")));
        if scans_a_table {
            found.push(format!("full scan: {step:?}"));
        }
        if step == "USE TEMP B-TREE FOR ORDER BY" && !case.full_sort_allowed {
            found.push(format!("sorts every matching row: {step:?}"));
        }
    }
    found
}

#[test]
fn the_copied_sql_is_what_the_store_runs() {
    for case in CASES {
        let source = squeeze(case.source);
        for piece in case.sql {
            assert!(
                source.contains(&squeeze(piece)),
                "{}: the store's source no longer contains {piece:?}; copy the new SQL here",
                case.name
            );
        }
    }
    // A partial index serves a query only when the query spells its predicate.
    assert_eq!(
        squeeze(MIGRATION).matches(OPEN).count(),
        3,
        "the three open-set partial indexes no longer have the predicate {OPEN:?}"
    );
    assert_eq!(
        squeeze(COVERING_MIGRATION).matches(OPEN).count(),
        2,
        "the covering open-set indexes no longer have the predicate {OPEN:?}"
    );
}

#[tokio::test]
async fn hot_reads_search_their_indexes_and_scan_no_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&format!("sqlite://{}/q.db", dir.path().display()))
        .await
        .expect("store opens");
    let mut report = String::new();
    let mut failures = Vec::new();
    for case in CASES {
        let steps = plan(&store, case).await;
        report.push_str(&format!("{}:\n", case.name));
        for step in &steps {
            report.push_str(&format!("    {step}\n"));
        }
        failures.extend(
            problems(case, &steps)
                .into_iter()
                .map(|p| format!("{}: {p}", case.name)),
        );
    }
    assert!(
        failures.is_empty(),
        "{}\n\nplans found:\n{report}",
        failures.join("\n")
    );
}

#[test]
fn the_plan_check_catches_a_full_scan_and_a_full_sort() {
    let case = &CASES[0];
    let bad = [
        "SCAN change_sets".to_owned(),
        "USE TEMP B-TREE FOR ORDER BY".to_owned(),
    ];
    assert_eq!(
        problems(case, &bad),
        [
            "no step starts with \"SEARCH change_sets USING COVERING INDEX change_sets_open_by_target_covering (\"",
            "full scan: \"SCAN change_sets\"",
            "sorts every matching row: \"USE TEMP B-TREE FOR ORDER BY\"",
        ]
    );
}
