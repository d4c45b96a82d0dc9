"""The OpenAI Agents SDK adapter: a tool's ``needs_approval`` is answered by Assent.

A call the agent's rules allow runs at once; any other call interrupts the run (the
SDK's own ``ToolApprovalItem``), and :meth:`AssentApprovals.resolve` awaits the
person's decision in Assent and answers the run state with ``approve`` or ``reject``
(the person's reason is what the model is told). An approved call runs with the
arguments that were approved, a person's edit included, and its run is reported back to
Assent::

    approvals = AssentApprovals(assent)
    agent = Agent(name="shop", tools=approvals.tools([refund, lookup]))
    result = await approvals.run(agent, "Refund order A-17")

or, step by step::

    result = await Runner.run(agent, "Refund order A-17")
    while result.interruptions:
        state = await approvals.resolve(result)
        result = await Runner.run(agent, state)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool, Runner
from agents.items import ToolApprovalItem
from agents.result import RunResult
from agents.run_context import RunContextWrapper
from agents.run_state import RunState
from agents.tool_context import ToolContext

from assent import Assent, Decision

__all__ = ["AssentApprovals", "NotApproved"]


class NotApproved(Exception):
    """A gated tool was asked to run a call Assent has not approved (an approval given
    to the run state by hand, or a call this adapter never proposed)."""


@dataclasses.dataclass
class _Entry:
    """What Assent answered for one call, so every question about it gets the same
    answer and the run uses the approved arguments."""

    needs_approval: bool
    decision: Decision
    # The arguments proposed, as canonical JSON: a call id reused for other arguments
    # is another call, which this decision does not cover.
    proposed: str


class AssentApprovals:
    """Gates OpenAI Agents SDK function tools in Assent.

    Keep one per application (or per conversation): the decisions it holds are looked
    up by the call's id when the run resumes.
    """

    def __init__(self, assent: Assent, *, target: str | None = None) -> None:
        self.assent = assent
        self.target = target
        self._entries: dict[str, _Entry] = {}
        self._gated: set[str] = set()

    def tools(self, tools: Iterable[FunctionTool]) -> list[FunctionTool]:
        """Gate each tool (see :meth:`tool`)."""
        return [self.tool(tool) for tool in tools]

    def tool(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` whose approval Assent answers, and which runs with the
        approved arguments and reports its run."""
        if not isinstance(tool, FunctionTool):
            raise TypeError(
                f"cannot gate {tool!r}: expected a FunctionTool (@function_tool)"
            )
        name = tool.name
        invoke = tool.on_invoke_tool
        # The SDK's invoker turns a tool's exception into a message for the model; the
        # implementation under it raises, so that a failure is reported as one.
        implementation = getattr(invoke, "_invoke_tool_impl", None)

        async def needs_approval(
            context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await self._needs_approval(name, params, call_id)

        async def on_invoke_tool(context: ToolContext[Any], model_input: str) -> Any:
            try:
                entry = self._take_approved(name, context.tool_call_id, model_input)
            except NotApproved as refusal:
                # The model is told, in the SDK's way for a refused call: as the output.
                return str(refusal)
            decision = entry.decision
            arguments = json.dumps(decision.args)
            if implementation is None:
                result = await invoke(context, arguments)
                await self.assent.report(decision, ok=True, result=_jsonable(result))
                return result
            try:
                result = await implementation(context, arguments)
            except Exception as error:
                await self.assent.report(decision, ok=False, error=str(error) or type(error).__name__)
                return await _model_error(gated, context, error)
            await self.assent.report(decision, ok=True, result=_jsonable(result))
            return result

        gated = dataclasses.replace(
            tool, needs_approval=needs_approval, on_invoke_tool=on_invoke_tool
        )
        self._gated.add(name)
        return gated

    def decision(self, call_id: str) -> Decision | None:
        """What Assent decided for a call this adapter proposed, until it ran."""
        entry = self._entries.get(call_id)
        return None if entry is None else entry.decision

    async def resolve(
        self, result: RunResult | RunState[Any], *, timeout: float | None = None
    ) -> RunState[Any]:
        """Await Assent's decision on each of the run's interruptions of a gated tool
        and answer the run state with it; interruptions of other tools are left for the
        application. Continue with ``Runner.run(agent, state)``."""
        state = result if isinstance(result, RunState) else result.to_state()
        items = [item for item in state.get_interruptions() if self._is_gated(item)]
        decisions = await asyncio.gather(
            *(self._await(item, timeout) for item in items)
        )
        for item, decision in zip(items, decisions, strict=True):
            if decision.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=_rejection(decision))
        return state

    async def run(
        self, agent: Agent[Any], input: str | list[Any], **kwargs: Any
    ) -> RunResult:
        """``Runner.run``, resumed after each interruption with Assent's decisions
        until the run ends (or stops at an interruption of a tool not gated here)."""
        result = await Runner.run(agent, input, **kwargs)
        while result.interruptions:
            if not all(self._is_gated(item) for item in result.interruptions):
                return result
            state = await self.resolve(result)
            result = await Runner.run(agent, state, **kwargs)
        return result

    async def _needs_approval(
        self, name: str, params: dict[str, Any], call_id: str
    ) -> bool:
        known = self._entries.get(call_id)
        if known is not None:
            if known.proposed != _canonical(params):
                raise NotApproved(
                    f"{name}: call {call_id} was proposed with other arguments;"
                    " Assent's decision does not cover these"
                )
            return known.needs_approval
        decision = await self.assent.propose(
            name, dict(params), target=self.target, tool_call_id=call_id, wait=False
        )
        # Only what the rules allowed at once runs at once; a wait and a denial both
        # go through the SDK's interruption, so the application sees every call that
        # did not run and the model is told why.
        entry = _Entry(
            needs_approval=not decision.approved,
            decision=decision,
            proposed=_canonical(params),
        )
        self._entries[call_id] = entry
        return entry.needs_approval

    async def _await(self, item: ToolApprovalItem, timeout: float | None) -> Decision:
        call_id = item.call_id
        if call_id is None:
            raise ValueError(f"interruption of {item.tool_name} names no call id")
        entry = self._entries.get(call_id)
        if entry is None:
            # The SDK asks for a manual approval without consulting needs_approval
            # (arguments it could not hand over unchanged): propose the call now.
            arguments = json.loads(item.arguments or "{}")
            if not isinstance(arguments, dict):
                raise ValueError(
                    f"arguments of {item.tool_name} ({call_id}) are not a JSON object"
                )
            decision = await self.assent.propose(
                str(item.tool_name),
                arguments,
                target=self.target,
                tool_call_id=call_id,
                wait=False,
            )
            entry = _Entry(needs_approval=True, decision=decision, proposed=_canonical(arguments))
            self._entries[call_id] = entry
        if entry.decision.status in ("pending", "timed_out"):
            entry.decision = await self.assent.wait(entry.decision, timeout=timeout)
        return entry.decision

    def _take_approved(self, name: str, call_id: str, model_input: str) -> _Entry:
        entry = self._entries.get(call_id)
        if entry is None:
            raise NotApproved(f"{name} ({call_id}) was not run: Assent has no decision for it here")
        try:
            called = _canonical(json.loads(model_input or "{}"))
        except ValueError:
            called = None
        if called != entry.proposed:
            raise NotApproved(
                f"{name} ({call_id}) was not run: the call is not the one proposed to Assent"
            )
        if not entry.decision.approved:
            # An approval given by hand to the run state does not make Assent's "no"
            # or "not yet" a yes.
            raise NotApproved(f"{name} ({call_id}) was not run: {_rejection(entry.decision)}")
        # One approval, one run.
        del self._entries[call_id]
        return entry

    def _is_gated(self, item: ToolApprovalItem) -> bool:
        return item.tool_name in self._gated


def _rejection(decision: Decision) -> str:
    """What the model is told about a call that did not run."""
    if decision.status == "rejected":
        return decision.reason or "rejected in Assent"
    if decision.status == "timed_out":
        return "nobody decided in time; the call still waits for a person in Assent"
    return "it still waits for a person in Assent"


def _jsonable(value: Any) -> Any:
    """A result as JSON can carry it (anything else as its text)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


async def _model_error(tool: FunctionTool, context: ToolContext[Any], error: Exception) -> Any:
    """What the SDK would tell the model about a failed tool (its failure formatter), or
    the exception when the tool has none."""
    try:
        from agents.tool import maybe_invoke_function_tool_failure_error_function
    except ImportError:  # pragma: no cover - an SDK without the formatter hook
        raise error from None
    message = await maybe_invoke_function_tool_failure_error_function(
        function_tool=tool, context=context, error=error
    )
    if message is None:
        raise error
    return message


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
