"""LangGraph's human-in-the-loop decision rate, for `assent-bench` (`src/langgraph.rs`).

A graph of one node that asks a person through `interrupt(...)`, checkpointed by
`SqliteSaver` (langgraph-checkpoint-sqlite) in a file of a temporary directory. For
each of N threads (`thread_id`), `invoke` runs until the interrupt; then every thread
is resumed with `Command(resume=...)`. One decision is one resume that completes (the
node returns with the answer, no interrupt left). The two phases are timed apart: the
resumes are what Assent's confirmation rate compares to (a confirmation, not the wake
that proposed it).

Durability as shipped: `SqliteSaver.setup()` sets `journal_mode=WAL` and leaves
`synchronous` at the SQLite library's default; both are read back with PRAGMA on the
saver's own connection and reported. The graph runs with LangGraph's default
durability mode (`"async"`: a step's checkpoint is written while the next runs, and
`invoke` returns once all are written) unless `--durability` says otherwise.

Prints one JSON line on stdout; anything else goes to stderr.

Usage: python interrupt_resume.py [--decisions N] [--warmup N] [--durability MODE]
"""

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


class State(TypedDict, total=False):
    item: str
    decision: str


def approve(state: State) -> State:
    """The human approval step: pauses the thread until a resume brings an answer."""
    answer = interrupt({"question": "apply this change?", "item": state["item"]})
    return {"decision": answer}


def build(saver: SqliteSaver):
    graph = StateGraph(State)
    graph.add_node("approve", approve)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=saver)


def percentile(samples: list[float], p: float) -> float:
    """Nearest rank, as `measure::percentile` in the Rust side."""
    ordered = sorted(samples)
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[min(int(rank), len(ordered)) - 1]


def run(graph, first: int, count: int, durability: str) -> tuple[float, float, list[float]]:
    """Threads `first..first+count`: all invoked to their interrupt, then all resumed.
    Returns (seconds of the invokes, seconds of the resumes, each resume's seconds)."""
    configs = [
        {"configurable": {"thread_id": f"thread-{n}"}} for n in range(first, first + count)
    ]
    start = time.perf_counter()
    for n, config in enumerate(configs):
        out = graph.invoke({"item": f"item-{first + n}"}, config, durability=durability)
        if "__interrupt__" not in out:
            raise SystemExit(f"thread {first + n} did not stop at its interrupt: {out!r}")
    interrupts = time.perf_counter() - start
    latencies = []
    start = time.perf_counter()
    for n, config in enumerate(configs):
        one = time.perf_counter()
        out = graph.invoke(Command(resume="approved"), config, durability=durability)
        latencies.append(time.perf_counter() - one)
        if out.get("decision") != "approved" or "__interrupt__" in out:
            raise SystemExit(f"thread {first + n} did not complete its resume: {out!r}")
    return interrupts, time.perf_counter() - start, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--durability", default="async", choices=["sync", "async", "exit"])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "checkpoints.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            journal_mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
            graph = build(saver)
            run(graph, 0, args.warmup, args.durability)
            interrupts, resumes, latencies = run(
                graph, args.warmup, args.decisions, args.durability
            )
            checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        finally:
            conn.close()

    print(
        json.dumps(
            {
                "decisions": args.decisions,
                "decisionsPerSecond": args.decisions / resumes,
                "resumeP50Us": percentile(latencies, 50) * 1e6,
                "resumeP99Us": percentile(latencies, 99) * 1e6,
                "interruptsPerSecond": args.decisions / interrupts,
                "checkpointsWritten": checkpoints,
                "durability": args.durability,
                "journalMode": str(journal_mode).upper(),
                "synchronous": SYNCHRONOUS.get(synchronous, str(synchronous)),
                "sqliteVersion": sqlite3.sqlite_version,
                "langgraphVersion": version("langgraph"),
                "checkpointSqliteVersion": version("langgraph-checkpoint-sqlite"),
                "python": sys.version.split()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
