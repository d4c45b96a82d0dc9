"""The client against a real `assent serve`: the rules' answers, a person's decision
from another process (confirmed, edited, rejected with a reason), the decorator, the
report of a run and a forged one refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from assent import AssentError, Decision, Denied


def test_a_call_the_rules_allow_runs_at_once_and_is_reported(server):
    _, assent = server.agent({"lookup": "allow"})
    sync = assent.sync()
    decision = sync.propose("lookup", {"order": "A-1"}, tool_call_id="c1")
    assert decision.approved, decision
    assert decision.change_set_id is None and decision.ran_url
    assert "lookup" in decision.why
    assert sync.report(decision, True, {"status": "shipped"})["recorded"] is True
    with pytest.raises(AssentError) as refused:
        sync.report(decision, True, "again")
    assert refused.value.status == 409
    assert any((r.get("detail") or "").startswith("ran in the client") for r in server.audit(decision.run_key))
    server.verify()


def test_a_denied_call_never_runs(server):
    _, assent = server.agent({"wipe": "deny"})
    ran = []

    @assent.gate("wipe")
    def wipe() -> None:
        ran.append(True)

    with pytest.raises(Denied) as denied:
        wipe()
    assert denied.value.decision.status == "rejected"
    assert ran == []


def test_a_person_confirms_from_another_process_within_a_second(server):
    agent, assent = server.agent()

    async def main() -> tuple[Decision, float]:
        join = server.decide_later(agent, "confirm")
        decision = await assent.propose("refund", {"order": "A-17", "cents": 4200}, timeout=30)
        return decision, time.monotonic() - join()

    decision, late = asyncio.run(main())
    assert decision.approved and not decision.edited, decision
    assert late < 1.0, f"the decision arrived {late:.2f} s after it was made"
    assert decision.args == {"order": "A-17", "cents": 4200}
    # A forged report: other arguments, then the right one, then a second one.
    sync = assent.sync()
    with pytest.raises(AssentError) as forged:
        sync.report(decision, True, "done", args={"order": "A-17", "cents": 999999})
    assert forged.value.status == 409
    sync.report(decision, True, "done")
    with pytest.raises(AssentError) as again:
        sync.report(decision, True, "done")
    assert again.value.status == 409
    server.verify()


def test_the_decorator_runs_with_the_edited_arguments(server):
    agent, assent = server.agent()
    ran = []

    @assent.gate("refund")
    def refund(order: str, cents: int) -> str:
        ran.append((order, cents))
        return f"refunded {cents}"

    join = server.decide_later(agent, "edit", "--args", '{"order": "A-17", "cents": 3000}')
    assert refund("A-17", 4200) == "refunded 3000"
    join()
    assert ran == [("A-17", 3000)]
    server.verify()


def test_the_async_decorator_raises_denied_with_the_persons_reason(server):
    agent, assent = server.agent()
    ran = []

    @assent.gate("refund")
    async def refund(order: str, cents: int) -> str:
        ran.append(order)
        return "refunded"

    join = server.decide_later(agent, "reject", "--reason", "already refunded")
    with pytest.raises(Denied) as denied:
        asyncio.run(refund("B-2", 100))
    join()
    assert denied.value.decision.reason == "already refunded"
    assert ran == []


def test_nobody_deciding_in_time_is_timed_out_and_the_item_still_waits(server):
    agent, assent = server.agent()
    sync = assent.sync()
    decision = sync.propose("refund", {"order": "C-3", "cents": 1}, timeout=1)
    assert decision.status == "timed_out" and not decision.approved
    join = server.decide_later(agent, "confirm", delay=0)
    later = sync.wait(decision, timeout=30)
    join()
    assert later.approved
    # A report for another item than the one approved is refused.
    other = sync.propose("refund", {"order": "D-4", "cents": 1}, wait=False)
    with pytest.raises(AssentError) as forged:
        sync.report(other, True, "done", args=later.args)
    assert forged.value.status == 409
