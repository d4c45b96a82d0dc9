"""What every test of the Python package shares: a real `assent serve` (started by the
Rust driver, `crates/assent-cli/tests/cli/clients.rs`, which sets `ASSENT_URL`,
`ASSENT_ADMIN_TOKEN`, `ASSENT_BIN` and `ASSENT_DB`), an agent of its own per test, and
a person deciding from another process (the real `assent` command line).

Without those variables (pytest run by hand without a server) every test is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import pytest

from assent import Assent


@dataclass
class Server:
    url: str
    admin: str
    bin: str
    db: str

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {self.admin}"},
            timeout=30,
        )
        assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def cli(self, *args: str) -> str:
        """`assent --db DB ARGS…` in another process: its stdout (fails on a non-zero exit)."""
        done = subprocess.run(
            [self.bin, "--db", self.db, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "RUST_LOG": ""},
        )
        assert done.returncode == 0, f"assent {' '.join(args)}: {done.stderr}"
        return done.stdout

    def agent(self, rules: dict[str, str] | None = None) -> tuple[str, Assent]:
        """A fresh agent (category `client`) with `rules` (tool → allow|ask|deny): its
        name and a client with its own agent token."""
        name = f"py-{uuid.uuid4().hex[:10]}"
        self.api("POST", "/api/agents", {"id": name, "categories": ["client"]})
        for tool, action in (rules or {}).items():
            self.api("PUT", f"/api/agents/{name}/rules/{tool}", {"action": action})
        token = self.api("POST", "/api/tokens", {"role": "agent", "agentId": name})["secret"]
        return name, Assent(self.url, token, poll=5)

    def pending_set(self, agent: str, timeout: float = 20.0) -> str:
        """The id of agent `agent`'s first set that waits for a person, once there is one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sets = self.api("GET", f"/api/change-sets?agentId={agent}&status=pending")
            if isinstance(sets, dict):
                sets = sets.get("changeSets", sets.get("sets", []))
            if sets:
                return str(sets[0]["id"])
            time.sleep(0.1)
        raise AssertionError(f"no set of {agent} waits")

    def decide_later(self, agent: str, *how: str, delay: float = 0.3) -> Callable[[], float]:
        """A person decides agent `agent`'s waiting call from another process
        (`assent confirm SET 0`, `assent edit …`, `assent reject …`: `how` is the
        command and its options, `SET` filled in), in a thread; returns a function that
        joins it and gives when the decision was made (`time.monotonic()`)."""
        decided: list[float] = []

        def person() -> None:
            set_id = self.pending_set(agent)
            time.sleep(delay)
            command, *options = how
            self.cli(command, set_id, "0", *options)
            decided.append(time.monotonic())

        thread = threading.Thread(target=person)
        thread.start()

        def join() -> float:
            thread.join(60)
            assert decided, "the person's decision failed"
            return decided[0]

        return join

    def verify(self) -> dict[str, Any]:
        """`GET /api/audit/verify`: the proof of the consent chain."""
        proof = self.api("GET", "/api/audit/verify")
        assert proof["verified"] is True, json.dumps(proof)
        return proof

    def audit(self, run_key: str) -> list[dict[str, Any]]:
        trail = self.api("GET", "/api/audit?limit=500")
        records = trail if isinstance(trail, list) else trail.get("records", [])
        return [r for r in records if r.get("runKey") == run_key]


@pytest.fixture(scope="session")
def server() -> Server:
    names = ["ASSENT_URL", "ASSENT_ADMIN_TOKEN", "ASSENT_BIN", "ASSENT_DB"]
    missing = [name for name in names if not os.environ.get(name)]
    if missing:
        pytest.skip(f"no Assent server to test against ({', '.join(missing)} unset)")
    return Server(*(os.environ[name] for name in names))
