"""The LangGraph adapter with the real `langgraph`, driven by a fake model: a call the
rules allow runs at once; a call that asks pauses the graph (LangGraph's `interrupt`),
is decided from another process (`assent confirm`, `edit`, `reject`), and the graph,
resumed with `Command(resume=…)`, goes on accordingly within a second; every run is
reported and the consent chain holds; a forged report is refused."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from assent import AssentError, Decision
from assent.adapters.langgraph import pending_decisions, resume_until_decided, tool_node

REFUNDS: list[dict[str, Any]] = []


@tool
def refund(order: str, cents: int) -> str:
    """Refund an order."""
    REFUNDS.append({"order": order, "cents": cents})
    return f"refunded {cents} cents on {order}"


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def fake_model(calls: list[dict[str, Any]]):
    """A model that asks for `calls` first, then answers with what the tools said."""

    def model(state: MessagesState) -> dict[str, Any]:
        told = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if not told:
            return {"messages": [AIMessage(content="", tool_calls=calls)]}
        return {"messages": [AIMessage(content=" | ".join(str(m.content) for m in told))]}

    return model


def graph_of(assent, calls):
    builder = StateGraph(MessagesState)
    builder.add_node("model", fake_model(calls))
    builder.add_node("tools", tool_node([refund, lookup], assent))
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", lambda s: "tools" if s["messages"][-1].tool_calls else END
    )
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver())


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "tool_call"}


def config() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


def test_a_call_the_rules_allow_runs_at_once(server):
    _, assent = server.agent({"lookup": "allow"})
    graph = graph_of(assent, [call("lookup", order="A-1")])
    state = asyncio.run(resume_until_decided(graph, {"messages": [HumanMessage("where is A-1?")]}, config(), assent))
    assert state["messages"][-1].content == "A-1: shipped"
    server.verify()


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (("confirm",), "refunded 4200 cents on A-17"),
        (("edit", "--args", '{"order": "A-17", "cents": 3000}'), "refunded 3000 cents on A-17"),
        (("reject", "--reason", "already refunded"), "already refunded"),
    ],
)
def test_an_asked_call_interrupts_and_resumes_as_a_person_decided(server, how, expected):
    agent, assent = server.agent()
    REFUNDS.clear()
    the_call = call("refund", order="A-17", cents=4200)
    graph = graph_of(assent, [the_call])
    cfg = config()

    async def main() -> tuple[Any, float, list]:
        # The first run stops at LangGraph's interrupt, naming the change set.
        await graph.ainvoke({"messages": [HumanMessage("refund A-17")]}, cfg)
        pending = pending_decisions(await graph.aget_state(cfg))
        assert len(pending) == 1 and pending[0][1][0].change_set_id, pending
        join = server.decide_later(agent, *how)
        state = await resume_until_decided(graph, None, cfg, assent)
        return state, time.monotonic() - join(), pending

    state, late, pending = asyncio.run(main())
    assert late < 1.0, f"the graph went on {late:.2f} s after the decision"
    assert expected in state["messages"][-1].content, state["messages"][-1]
    if how[0] == "reject":
        assert REFUNDS == []
    else:
        assert len(REFUNDS) == 1, REFUNDS
        # A forged report of the same item, with other arguments, is refused.
        decision = asyncio.run(assent.decision(pending[0][1][0]))
        assert decision.approved and decision.reported
        with pytest.raises(AssentError) as forged:
            asyncio.run(assent.report(decision, True, "x", args={"order": "A-17", "cents": 1}))
        assert forged.value.status == 409
    server.verify()


def test_a_synchronous_graph_is_resumed_by_hand_with_command_resume(server):
    from langgraph.types import Command

    agent, assent = server.agent()
    REFUNDS.clear()
    graph = graph_of(assent, [call("refund", order="C-3", cents=700)])
    cfg = config()
    graph.invoke({"messages": [HumanMessage("refund C-3")]}, cfg)
    [(interrupt_id, [decision])] = pending_decisions(graph.get_state(cfg))
    assert decision.status == "pending" and decision.tool == "refund"
    server.cli("confirm", decision.change_set_id, "0")
    decided = assent.sync().wait(decision, timeout=30)
    assert decided.approved
    state = graph.invoke(Command(resume={interrupt_id: [dict(decided.raw)]}), cfg)
    assert state["messages"][-1].content == "refunded 700 cents on C-3"
    assert REFUNDS == [{"order": "C-3", "cents": 700}]
    assert pending_decisions(graph.get_state(cfg)) == []
    server.verify()
