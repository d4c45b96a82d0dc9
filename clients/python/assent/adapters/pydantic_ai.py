"""The Pydantic AI adapter: deferred tool approvals decided in Assent.

Tools wrapped by :meth:`AssentDeferred.toolset` are proposed to Assent when the model
calls them: a call the agent's rules allow runs at once; any other call is deferred
(the run ends with the SDK's own ``DeferredToolRequests``), and
:meth:`AssentDeferred.results` awaits each person's decision and builds the
``DeferredToolResults`` that resume the run: ``ToolApproved`` with the approved
arguments (a person's edit included), or ``ToolDenied`` with the person's reason. An
approved call runs with exactly those arguments and its run is reported back to
Assent::

    deferred = AssentDeferred(assent)
    agent = Agent(model, output_type=[str, DeferredToolRequests],
                  toolsets=[deferred.toolset(shop_tools)])
    result = await deferred.run(agent, "Refund order A-17")

or, step by step::

    result = await agent.run("Refund order A-17")
    while isinstance(result.output, DeferredToolRequests):
        results = await deferred.results(result.output)
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=results)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import ToolApproved, ToolDenied
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from assent import Assent, Decision

__all__ = ["AssentDeferred", "AssentToolset", "NotApproved"]


class NotApproved(Exception):
    """A gated tool was asked to run a call Assent has not approved (results written by
    hand, or a call this adapter never proposed): the run ends with it."""


class AssentDeferred:
    """Gates Pydantic AI tools in Assent.

    Keep one per application (or per conversation): the decisions it holds are looked
    up by ``tool_call_id`` when the run resumes.
    """

    def __init__(self, assent: Assent, *, target: str | None = None) -> None:
        self.assent = assent
        self.target = target
        self._decisions: dict[str, Decision] = {}

    def toolset(
        self, tools: AbstractToolset[Any] | Sequence[Callable[..., Any]]
    ) -> AssentToolset:
        """Gate a toolset, or plain functions (made a ``FunctionToolset``)."""
        wrapped = (
            tools if isinstance(tools, AbstractToolset) else FunctionToolset(list(tools))
        )
        return AssentToolset(wrapped=wrapped, gate=self)

    def decision(self, tool_call_id: str) -> Decision | None:
        """What Assent decided for a call deferred here, until it ran."""
        return self._decisions.get(tool_call_id)

    async def results(
        self, requests: DeferredToolRequests, *, timeout: float | None = None
    ) -> DeferredToolResults:
        """Await the person's decision on each deferred call proposed here and answer
        it (approvals of other toolsets are left for the application to add)."""
        parts = [
            part for part in requests.approvals if part.tool_call_id in self._decisions
        ]
        decisions = await asyncio.gather(
            *(self._await(part.tool_call_id, timeout) for part in parts)
        )
        results = DeferredToolResults()
        for part, decision in zip(parts, decisions, strict=True):
            if decision.approved:
                # Always the approved arguments, so that what runs is what was decided
                # (a person's edit, or the proposal as shown).
                results.approvals[part.tool_call_id] = ToolApproved(
                    override_args=dict(decision.args)
                )
            else:
                results.approvals[part.tool_call_id] = ToolDenied(_rejection(decision))
            if decision.decided_by is not None:
                results.answered_by[part.tool_call_id] = decision.decided_by
        return results

    async def run(
        self, agent: Agent[Any, Any], prompt: str | None = None, **kwargs: Any
    ) -> AgentRunResult[Any]:
        """``agent.run``, resumed with Assent's decisions while it ends on deferred
        calls proposed here (it stops at any other deferred call). The agent's output
        type must include ``DeferredToolRequests``."""
        result = await agent.run(prompt, **kwargs)
        kwargs.pop("message_history", None)
        while isinstance(result.output, DeferredToolRequests):
            requests = result.output
            if requests.calls or any(
                part.tool_call_id not in self._decisions for part in requests.approvals
            ):
                return result
            results = await self.results(requests)
            result = await agent.run(
                message_history=result.all_messages(),
                deferred_tool_results=results,
                **kwargs,
            )
        return result

    async def _await(self, tool_call_id: str, timeout: float | None) -> Decision:
        decision = self._decisions[tool_call_id]
        if decision.status in ("pending", "timed_out"):
            decision = await self.assent.wait(decision, timeout=timeout)
            self._decisions[tool_call_id] = decision
        return decision

    async def _call(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        run: Callable[[], Any],
    ) -> Any:
        call_id = ctx.tool_call_id
        if call_id is None:
            raise NotApproved(f"{name} was not run: the call has no tool_call_id")
        args = to_jsonable_python(tool_args)
        if ctx.tool_call_approved:
            decision = self._decisions.get(call_id)
            if decision is None:
                raise NotApproved(
                    f"{name} ({call_id}) was not run: Assent has no decision for it here"
                )
            if not decision.approved:
                # An approval written by hand does not make Assent's "no" a yes.
                raise NotApproved(f"{name} ({call_id}) was not run: {_rejection(decision)}")
            if _canonical(args) != _canonical(decision.args):
                raise NotApproved(
                    f"{name} ({call_id}) was not run: its arguments are not the ones approved"
                )
            del self._decisions[call_id]
            return await self._run(decision, run)
        decision = await self.assent.propose(
            name, args, target=self.target, tool_call_id=call_id, wait=False
        )
        if decision.approved:
            if _canonical(args) != _canonical(decision.args):
                # The server answered for this call id with other arguments (an id
                # reused): its yes is not for this call.
                raise NotApproved(
                    f"{name} ({call_id}) was not run: Assent approved other arguments"
                )
            return await self._run(decision, run)
        # A wait and a denial both defer the call: the application sees every call
        # that did not run, and the model is told why through the results.
        self._decisions[call_id] = decision
        raise ApprovalRequired(
            metadata={
                "assent": {
                    "changeSetId": decision.change_set_id,
                    "item": decision.item,
                    "why": decision.why,
                }
            }
        )

    async def _run(self, decision: Decision, run: Callable[[], Any]) -> Any:
        try:
            result = await run()
        except Exception as error:
            await self.assent.report(
                decision, ok=False, error=str(error) or type(error).__name__
            )
            raise
        await self.assent.report(decision, ok=True, result=to_jsonable_python(result, fallback=str))
        return result


@dataclass
class AssentToolset(WrapperToolset[Any]):
    """A toolset whose calls Assent decides (made by :meth:`AssentDeferred.toolset`)."""

    gate: AssentDeferred = field(kw_only=True)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        return await self.gate._call(
            name,
            tool_args,
            ctx,
            lambda: super(AssentToolset, self).call_tool(name, tool_args, ctx, tool),
        )


def _rejection(decision: Decision) -> str:
    """What the model is told about a call that did not run."""
    if decision.status == "rejected":
        return decision.reason or "rejected in Assent"
    if decision.status == "timed_out":
        return "nobody decided in time; the call still waits for a person in Assent"
    return "it still waits for a person in Assent"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
