"""LangGraph: a tool node whose calls Assent decides, paused with LangGraph's own
`interrupt` while a person decides, and resumed with `Command(resume=…)`.

    from assent.adapters.langgraph import resume_until_decided, tool_node

    builder.add_node("tools", tool_node([refund, lookup], assent))
    graph = builder.compile(checkpointer=InMemorySaver())   # interrupts need one
    state = await resume_until_decided(graph, {"messages": [...]}, config, assent)

`tool_node` proposes every tool call of the last AI message (by its id: proposed again
when the node re-runs on resume, it gets the same answer). Calls the rules allow run at
once; when any call waits for a person, the node interrupts (before running anything)
with `{"assent": [DECISION, …]}`, the pending decisions as Assent answered them. A
person decides from any door; `resume_until_decided` (or your own loop) awaits the
decisions and resumes the graph with `Command(resume=…)`; the node then runs what was
approved with the approved arguments (a person's edit included), reports each run, and
answers a rejected call with the person's reason as the tool's message."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.types import Command, interrupt

from ..client import Assent, Decision, _jsonable, _run

__all__ = ["INTERRUPT_KEY", "pending_decisions", "resume_until_decided", "tool_node"]

#: The key of the interrupt's value that holds the pending decisions.
INTERRUPT_KEY = "assent"


def _tools(tools: Sequence[BaseTool | Callable[..., Any]]) -> dict[str, BaseTool]:
    named: dict[str, BaseTool] = {}
    for tool in tools:
        found = tool if isinstance(tool, BaseTool) else StructuredTool.from_function(tool)
        named[found.name] = found
    return named


def _calls(state: Mapping[str, Any] | Sequence[Any], key: str) -> list[dict[str, Any]]:
    messages = state.get(key, []) if isinstance(state, Mapping) else state
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage):
        return []
    return list(last.tool_calls)


def _denied(call: Mapping[str, Any], decision: Decision) -> ToolMessage:
    reason = decision.message or decision.reason or decision.why
    return ToolMessage(
        content=reason, tool_call_id=call["id"], name=call["name"], status="error"
    )


def tool_node(
    tools: Sequence[BaseTool | Callable[..., Any]],
    assent: Assent,
    *,
    target: str | None = None,
    messages_key: str = "messages",
) -> RunnableLambda:
    """A node running the last AI message's tool calls as Assent decides them (see
    the module's documentation). `tools`: LangChain tools or plain functions."""
    named = _tools(tools)

    async def propose_all(
        calls: list[dict[str, Any]],
    ) -> list[Decision]:
        decisions = []
        for call in calls:
            decisions.append(
                await assent.propose(
                    call["name"],
                    call.get("args") or {},
                    target=target,
                    tool_call_id=call["id"],
                    wait=False,
                )
            )
        return decisions

    async def decide(calls: list[dict[str, Any]]) -> list[Decision]:
        decisions = await propose_all(calls)
        while any(d.status == "pending" for d in decisions):
            # Nothing has run yet: the node re-runs from its start on resume.
            interrupt(
                {INTERRUPT_KEY: [dict(d.raw) for d in decisions if d.status == "pending"]}
            )
            # Resumed: what a person decided, as Assent has it (never the resume value).
            decisions = [
                await assent.decision(d) if d.status == "pending" else d for d in decisions
            ]
        return decisions

    async def run_one(call: dict[str, Any], decision: Decision) -> ToolMessage:
        if not decision.approved:
            return _denied(call, decision)
        tool = named.get(call["name"])
        if tool is None:
            error = f"no tool named {call['name']!r} in this node"
            await assent.report(decision, False, error=error)
            return ToolMessage(
                content=error, tool_call_id=call["id"], name=call["name"], status="error"
            )
        if decision.reported:
            return ToolMessage(
                content="This call ran already (its run is recorded in Assent).",
                tool_call_id=call["id"],
                name=call["name"],
            )
        try:
            result = await tool.ainvoke(decision.args)
        except Exception as failure:  # the tool's own failure, told to the model
            await assent.report(decision, False, error=str(failure))
            return ToolMessage(
                content=f"Error: {failure}",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        await assent.report(decision, True, _jsonable(result))
        return ToolMessage(
            content=result if isinstance(result, str) else str(result),
            tool_call_id=call["id"],
            name=call["name"],
        )

    async def arun(state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        calls = _calls(state, messages_key)
        decisions = await decide(calls)
        messages = [await run_one(call, d) for call, d in zip(calls, decisions)]
        return {messages_key: messages}

    def run(state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        return _run(arun(state, config))

    return RunnableLambda(run, afunc=arun, name="assent_tools")


def pending_decisions(snapshot: Any) -> list[tuple[str, list[Decision]]]:
    """The Assent interrupts a paused graph's state (`graph.get_state(config)`) waits
    on: each interrupt's id with the decisions it waits for."""
    found = []
    for task in getattr(snapshot, "tasks", ()) or ():
        for pending in getattr(task, "interrupts", ()) or ():
            value = getattr(pending, "value", None)
            if isinstance(value, Mapping) and INTERRUPT_KEY in value:
                decisions = [Decision.from_json(raw) for raw in value[INTERRUPT_KEY]]
                found.append((str(getattr(pending, "id", "")), decisions))
    return found


async def resume_until_decided(
    graph: Any,
    graph_input: Any,
    config: RunnableConfig,
    assent: Assent,
    *,
    timeout: float | None = None,
) -> Any:
    """Invokes `graph` (compiled with a checkpointer) with `graph_input`; whenever it
    pauses on Assent's interrupt, awaits the people's decisions (at most `timeout`
    seconds each, default the client's) and resumes it with `Command(resume=…)`.
    Returns the graph's last output: its final state, or, when nobody decided in time,
    the paused graph's output (resume it later with `graph_input=None`)."""
    if graph_input is None:
        output = None
    else:
        output = await graph.ainvoke(graph_input, config)
    while True:
        snapshot = await graph.aget_state(config)
        pending = pending_decisions(snapshot)
        if not pending:
            if output is None:
                return snapshot.values
            return output
        resume: dict[str, Any] = {}
        for interrupt_id, decisions in pending:
            decided = []
            for decision in decisions:
                waited = await assent.wait(decision, timeout)
                if waited.status == "timed_out":
                    return output if output is not None else snapshot.values
                decided.append(dict(waited.raw))
            resume[interrupt_id] = decided
        output = await graph.ainvoke(Command(resume=resume), config)

