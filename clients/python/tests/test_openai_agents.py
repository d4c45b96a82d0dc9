"""The OpenAI Agents SDK adapter with the real SDK driven by a scripted model, against
a real ``assent serve``: a call the rules allow runs at once; a call that asks
interrupts the run, is confirmed, edited or rejected from another process (the
``assent`` CLI), and the run continues accordingly; each run is reported, a forged
report is refused, and the consent chain verifies."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from assent import Assent, AssentError, Decision
from assent.adapters.openai_agents import AssentApprovals, NotApproved

from conftest import Server

# The SDK would send its traces to OpenAI: nothing leaves the machine in a test.
set_tracing_disabled(True)

LOOKUP = "oa_lookup"
REFUND = "oa_refund"


class ScriptedModel(Model):
    """Calls one tool; once the input carries the tool's output, answers with it as
    text, so a test reads what the model was told."""

    def __init__(self, name: str, args: dict[str, Any], call_id: str) -> None:
        self.name, self.args, self.call_id = name, args, call_id

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        items = input if isinstance(input, list) else []
        outputs = [
            item["output"]
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if outputs:
            text = "told: " + json.dumps(outputs)
            output: list[Any] = [
                ResponseOutputMessage(
                    id="msg_1",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    id="fc_1",
                    type="function_call",
                    call_id=self.call_id,
                    name=self.name,
                    arguments=json.dumps(self.args),
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests do not stream")


def shop(ran: list[dict[str, Any]]) -> list[Any]:
    @function_tool(name_override=LOOKUP)
    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append({"order": order})
        return f"{order} shipped"

    @function_tool(name_override=REFUND)
    def refund(order: str, cents: int) -> str:
        """Refund part of an order."""
        ran.append({"order": order, "cents": cents})
        return f"refunded {cents} cents on {order}"

    return [lookup, refund]


def call_id() -> str:
    # The run key is per agent, and other tests share the agent.
    return f"oa-{uuid.uuid4()}"


def item(decision: Decision | None) -> list[str]:
    assert decision is not None and decision.change_set_id is not None
    return [decision.change_set_id, str(decision.item)]


def shop_client(server: Server) -> tuple[str, Assent]:
    """A fresh agent whose rules allow the lookup and ask for the refund, and its client."""
    return server.agent({LOOKUP: "allow", REFUND: "ask"})


def ran_url(server: Server, decision: Decision) -> str:
    """Where the item's run would be reported, whatever the decision says."""
    return f"{server.url}/api/change-sets/{decision.change_set_id}/items/{decision.item}/ran"


async def ask_refund(approvals: AssentApprovals, cents: int) -> tuple[Any, Any, str, list[dict[str, Any]]]:
    """The first turn of a refund that asks: the run stops at the SDK's interruption."""
    ran: list[dict[str, Any]] = []
    cid = call_id()
    agent = Agent(
        name="shop",
        tools=approvals.tools(shop(ran)),
        model=ScriptedModel(REFUND, {"order": "A-17", "cents": cents}, cid),
    )
    result = await Runner.run(agent, "refund A-17")
    assert [item.tool_name for item in result.interruptions] == [REFUND]
    assert ran == [], "nothing ran before a person decided"
    decision = approvals.decision(cid)
    assert decision is not None and decision.status == "pending", decision
    return agent, result, cid, ran


async def decide_and_resume(
    server: Server, approvals: AssentApprovals, agent: Any, result: Any, *command: str
) -> Any:
    """A person decides from another process while the adapter awaits the decision."""
    resolving = asyncio.create_task(approvals.resolve(result))
    await asyncio.to_thread(server.cli, *command)
    state = await resolving
    return await Runner.run(agent, state)


def test_a_call_the_rules_allow_runs_at_once_and_is_reported(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        ran: list[dict[str, Any]] = []
        cid = call_id()
        agent = Agent(
            name="shop",
            tools=approvals.tools(shop(ran)),
            model=ScriptedModel(LOOKUP, {"order": "A-17"}, cid),
        )
        result = await approvals.run(agent, "where is A-17?")
        assert ran == [{"order": "A-17"}]
        assert "A-17 shipped" in result.final_output
        assert approvals.decision(cid) is None, "the decision was used up by its run"
        assert server.audit(f"client:{agent_name}:{cid}"), "the run is in the audit trail under its run key"

    asyncio.run(scenario())


def test_a_person_confirms_from_another_process_and_the_run_continues(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        agent, result, cid, ran = await ask_refund(approvals, 4200)
        decision = approvals.decision(cid)
        final = await decide_and_resume(server, approvals, agent, result, "confirm", *item(decision))
        assert ran == [{"order": "A-17", "cents": 4200}]
        assert "refunded 4200 cents on A-17" in final.final_output

    asyncio.run(scenario())


def test_a_persons_edit_runs_and_the_models_arguments_are_refused(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        agent, result, cid, ran = await ask_refund(approvals, 9900)
        decision = approvals.decision(cid)
        assert decision is not None
        edited = json.dumps({"order": "A-17", "cents": 3000})
        final = await decide_and_resume(server, approvals, agent, result, "edit", *item(decision), "--args", edited)
        assert ran == [{"order": "A-17", "cents": 3000}]
        assert "refunded 3000 cents" in final.final_output
        forged = _replace(decision, args={"order": "A-17", "cents": 9900}, ran_url=ran_url(server, decision))
        with pytest.raises(AssentError) as refused:
            await assent.report(forged, ok=True, result="refunded")
        assert refused.value.status == 409

    asyncio.run(scenario())


def test_a_rejection_and_its_reason_reach_the_model_and_nothing_runs(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        agent, result, cid, ran = await ask_refund(approvals, 500000)
        decision = approvals.decision(cid)
        assert decision is not None
        final = await decide_and_resume(
            server, approvals, agent, result, "reject", *item(decision), "--reason", "over the refund limit"
        )
        assert ran == []
        assert "over the refund limit" in final.final_output
        with pytest.raises(AssentError) as refused:
            await assent.report(_replace(decision, ran_url=ran_url(server, decision)), ok=True, result="refunded anyway")
        assert refused.value.status == 409

    asyncio.run(scenario())


def test_an_approval_given_by_hand_does_not_run_a_call_assent_has_not_approved(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        agent, result, cid, ran = await ask_refund(approvals, 700)
        state = result.to_state()
        for interruption in result.interruptions:
            state.approve(interruption)
        final = await Runner.run(agent, state)
        assert ran == [], "the application's own yes does not run the tool"
        assert "was not run" in final.final_output
        decision = approvals.decision(cid)
        assert decision is not None and decision.status == "pending"
        server.cli("reject", *item(decision), "--reason", "cleanup")

    asyncio.run(scenario())


def test_a_report_for_another_item_is_refused_and_the_chain_verifies(server: Server) -> None:
    async def scenario() -> None:
        agent_name, assent = shop_client(server)
        approved = await assent.propose(LOOKUP, {"order": "B-2"}, tool_call_id=call_id())
        assert approved.status == "approved"
        approvals = AssentApprovals(assent)
        _agent, _result, cid, _ran = await ask_refund(approvals, 100)
        pending = approvals.decision(cid)
        assert pending is not None
        with pytest.raises(AssentError) as refused:
            await assent.report(_replace(approved, ran_url=ran_url(server, pending)), ok=True, result="done")
        assert refused.value.status == 409
        await assent.report(approved, ok=True, result="B-2 shipped")
        with pytest.raises(AssentError) as again:
            await assent.report(approved, ok=True, result="again")
        assert again.value.status == 409
        server.cli("reject", *item(pending), "--reason", "cleanup")
        assert "verified" in server.cli("audit", "verify")
        server.verify()

    asyncio.run(scenario())


def _replace(decision: Decision, **changes: Any) -> Decision:
    import dataclasses

    return dataclasses.replace(decision, **changes)



def test_a_call_id_reused_for_other_arguments_does_not_run(server: Server) -> None:
    async def scenario() -> None:
        _agent_name, assent = shop_client(server)
        approvals = AssentApprovals(assent)
        ran: list[dict[str, Any]] = []
        cid = call_id()
        tools = approvals.tools(shop(ran))
        first = Agent(name="shop", tools=tools, model=ScriptedModel(REFUND, {"order": "A-17", "cents": 100}, cid))
        await Runner.run(first, "refund A-17")
        other = Agent(name="shop", tools=tools, model=ScriptedModel(REFUND, {"order": "B-2", "cents": 999999}, cid))
        # The SDK ends the run with its own error, caused by the adapter's refusal.
        with pytest.raises(Exception) as refused:
            await Runner.run(other, "refund B-2")
        assert isinstance(refused.value, NotApproved) or isinstance(refused.value.__cause__, NotApproved)
        assert ran == []
        server.cli("reject", *item(approvals.decision(cid)), "--reason", "cleanup")

    asyncio.run(scenario())

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "openai_agents_refund.py"


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
