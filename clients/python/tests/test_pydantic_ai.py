"""The Pydantic AI adapter with the real ``pydantic-ai`` driven by a ``FunctionModel``,
against a real ``assent serve``: a call the rules allow runs at once; a call that asks
ends the run with ``DeferredToolRequests``, is confirmed, edited or rejected from another
process (the ``assent`` CLI), and the ``DeferredToolResults`` built from the decisions
continue the run accordingly; each run is reported, a forged report is refused, and the
consent chain verifies."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolApproved

from assent import Assent, AssentError, Decision
from assent.adapters.pydantic_ai import AssentDeferred, NotApproved

from conftest import Server

LOOKUP = "pa_lookup"
REFUND = "pa_refund"


def scripted(name: str, args: dict[str, Any], call_id: str) -> FunctionModel:
    """Calls one tool; once the request carries the tool's outcome (its return, or the
    denial), answers with it as text, so a test reads what the model was told."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            told = [
                str(part.content)
                for part in last.parts
                if isinstance(part, ToolReturnPart) or part.part_kind == "retry-prompt"
            ]
            if told:
                return ModelResponse(parts=[TextPart("told: " + json.dumps(told))])
        return ModelResponse(parts=[ToolCallPart(name, dict(args), tool_call_id=call_id)])

    return FunctionModel(respond)


def shop(ran: list[dict[str, Any]]) -> list[Any]:
    def pa_lookup(order: str) -> str:
        """Look an order up."""
        ran.append({"order": order})
        return f"{order} shipped"

    def pa_refund(order: str, cents: int) -> str:
        """Refund part of an order."""
        ran.append({"order": order, "cents": cents})
        return f"refunded {cents} cents on {order}"

    return [pa_lookup, pa_refund]


def call_id() -> str:
    # The run key is per agent, and other tests share the agent.
    return f"pa-{uuid.uuid4()}"


def agent_for(deferred: AssentDeferred, ran: list[dict[str, Any]], name: str, args: dict[str, Any], cid: str) -> Agent[None, Any]:
    return Agent(
        scripted(name, args, cid),
        output_type=[str, DeferredToolRequests],
        toolsets=[deferred.toolset(shop(ran))],
    )


def item(decision: Decision | None) -> list[str]:
    assert decision is not None and decision.change_set_id is not None
    return [decision.change_set_id, str(decision.item)]


def shop_client(server: Server) -> tuple[str, Assent]:
    """A fresh agent whose rules allow the lookup and ask for the refund, and its client."""
    return server.agent({LOOKUP: "allow", REFUND: "ask"})


def ran_url(server: Server, decision: Decision) -> str:
    """Where the item's run would be reported, whatever the decision says."""
    return f"{server.url}/api/change-sets/{decision.change_set_id}/items/{decision.item}/ran"


async def ask_refund(deferred: AssentDeferred, cents: int) -> tuple[Agent[None, Any], Any, str, list[dict[str, Any]]]:
    """The first run of a refund that asks: it ends on the SDK's deferred requests."""
    ran: list[dict[str, Any]] = []
    cid = call_id()
    agent = agent_for(deferred, ran, REFUND, {"order": "A-17", "cents": cents}, cid)
    result = await agent.run("refund A-17")
    assert isinstance(result.output, DeferredToolRequests), result.output
    assert [part.tool_call_id for part in result.output.approvals] == [cid]
    assert ran == [], "nothing ran before a person decided"
    decision = deferred.decision(cid)
    assert decision is not None and decision.status == "pending", decision
    return agent, result, cid, ran


async def decide_and_resume(
    server: Server, deferred: AssentDeferred, agent: Agent[None, Any], result: Any, *command: str
) -> Any:
    """A person decides from another process while the adapter awaits the decision."""
    answering = asyncio.create_task(deferred.results(result.output))
    await asyncio.to_thread(server.cli, *command)
    results = await answering
    return await agent.run(message_history=result.all_messages(), deferred_tool_results=results)


def test_a_call_the_rules_allow_runs_at_once_and_is_reported(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        ran: list[dict[str, Any]] = []
        cid = call_id()
        agent = agent_for(deferred, ran, LOOKUP, {"order": "A-17"}, cid)
        result = await deferred.run(agent, "where is A-17?")
        assert ran == [{"order": "A-17"}]
        assert "A-17 shipped" in result.output
        assert server.audit(f"client:{agent_name}:{cid}"), "the run is in the audit trail under its run key"

    asyncio.run(scenario())


def test_a_person_confirms_from_another_process_and_the_run_continues(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        agent, result, cid, ran = await ask_refund(deferred, 4200)
        final = await decide_and_resume(server, deferred, agent, result, "confirm", *item(deferred.decision(cid)))
        assert ran == [{"order": "A-17", "cents": 4200}]
        assert "refunded 4200 cents on A-17" in final.output
        assert deferred.decision(cid) is None, "the decision was used up by its run"

    asyncio.run(scenario())


def test_a_persons_edit_runs_and_the_models_arguments_are_refused(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        agent, result, cid, ran = await ask_refund(deferred, 9900)
        decision = deferred.decision(cid)
        assert decision is not None
        edited = json.dumps({"order": "A-17", "cents": 3000})
        final = await decide_and_resume(server, deferred, agent, result, "edit", *item(decision), "--args", edited)
        assert ran == [{"order": "A-17", "cents": 3000}]
        assert "refunded 3000 cents" in final.output
        forged = dataclasses.replace(decision, args={"order": "A-17", "cents": 9900}, ran_url=ran_url(server, decision))
        with pytest.raises(AssentError) as refused:
            await assent.report(forged, ok=True, result="refunded")
        assert refused.value.status == 409

    asyncio.run(scenario())


def test_a_rejection_and_its_reason_reach_the_model_and_nothing_runs(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        agent, result, cid, ran = await ask_refund(deferred, 500000)
        decision = deferred.decision(cid)
        assert decision is not None
        final = await decide_and_resume(
            server, deferred, agent, result, "reject", *item(decision), "--reason", "over the refund limit"
        )
        assert ran == []
        assert "over the refund limit" in final.output
        with pytest.raises(AssentError) as refused:
            await assent.report(dataclasses.replace(decision, ran_url=ran_url(server, decision)), ok=True, result="refunded anyway")
        assert refused.value.status == 409

    asyncio.run(scenario())


def test_results_written_by_hand_do_not_run_a_call_assent_has_not_approved(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        agent, result, cid, ran = await ask_refund(deferred, 700)
        by_hand = DeferredToolResults(approvals={cid: ToolApproved()})
        with pytest.raises(NotApproved):
            await agent.run(message_history=result.all_messages(), deferred_tool_results=by_hand)
        assert ran == [], "the application's own yes does not run the tool"
        decision = deferred.decision(cid)
        assert decision is not None and decision.status == "pending"
        server.cli("reject", *item(decision), "--reason", "cleanup")

    asyncio.run(scenario())


def test_a_report_for_another_item_is_refused_and_the_chain_verifies(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approved = await assent.propose(LOOKUP, {"order": "B-2"}, tool_call_id=call_id())
        assert approved.status == "approved"
        deferred = AssentDeferred(assent)
        _agent, _result, cid, _ran = await ask_refund(deferred, 100)
        pending = deferred.decision(cid)
        assert pending is not None
        with pytest.raises(AssentError) as refused:
            await assent.report(dataclasses.replace(approved, ran_url=ran_url(server, pending)), ok=True, result="done")
        assert refused.value.status == 409
        await assent.report(approved, ok=True, result="B-2 shipped")
        with pytest.raises(AssentError) as again:
            await assent.report(approved, ok=True, result="again")
        assert again.value.status == 409
        server.cli("reject", *item(pending), "--reason", "cleanup")
        assert "verified" in server.cli("audit", "verify")
        server.verify()

    asyncio.run(scenario())



def test_a_call_id_reused_for_other_arguments_does_not_run(server: Server) -> None:
    async def scenario() -> None:
        _agent_name, assent = shop_client(server)
        deferred = AssentDeferred(assent)
        ran: list[dict[str, Any]] = []
        cid = call_id()
        await deferred.run(agent_for(deferred, ran, LOOKUP, {"order": "A-17"}, cid), "where is A-17?")
        assert ran == [{"order": "A-17"}]
        # The same call id again, for another order: Assent's yes was for A-17. The
        # server refuses the proposal (409) before the adapter's own check would.
        with pytest.raises((NotApproved, AssentError)):
            await deferred.run(agent_for(deferred, ran, LOOKUP, {"order": "B-2"}, cid), "where is B-2?")
        assert ran == [{"order": "A-17"}]

    asyncio.run(scenario())

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pydantic_ai_refund.py"


@pytest.mark.parametrize(
    ("how", "printed"),
    [
        (("confirm",), "refunded 4200 cents on A-17"),
        (("edit", "--args", '{"order": "A-17", "cents": 3000}'), "refunded 3000 cents on A-17"),
        (("reject", "--reason", "too much"), "too much"),
    ],
)
def test_the_guide_example_runs_as_written(server: Server, how: tuple[str, ...], printed: str) -> None:
    """The guide's example (the chapter's block is this file, byte for byte:
    test_examples.py), a person deciding from another process."""
    agent_name, assent = server.agent()
    join = server.decide_later(agent_name, *how)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ASSENT_TOKEN": assent.token},
    )
    join()
    assert done.returncode == 0, done.stderr
    assert printed in done.stdout, done.stdout
    server.verify()
