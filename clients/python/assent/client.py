"""The client of Assent's client-executed calls: propose a call, await the decision,
report the run (docs/guide/from-python-and-typescript.md has the HTTP contract).

`Assent` is async; `Assent.sync()` gives the same calls, blocking. Every failed request
raises `AssentError`; a call Assent did not approve is never run by `gate` (it raises
`Denied`)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, TypeVar, cast
from urllib.parse import urljoin

import httpx

__all__ = ["Assent", "AssentError", "Decision", "Denied", "SyncAssent"]

T = TypeVar("T")

#: The longest single long poll the server allows (`?wait=`, seconds).
MAX_POLL = 60.0


class AssentError(Exception):
    """A request to Assent failed: `status` (0 when no answer came) and `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"Assent answered {status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Decision:
    """What Assent decided about one call.

    `status` is `approved` (run it, with `args`), `rejected` (do not; `reason` says
    why), `pending` (a person has not decided yet) or `timed_out` (the client's own
    wait ran out while a person had not decided; the item still waits)."""

    status: str
    tool: str
    args: dict[str, Any]
    edited: bool = False
    reason: str | None = None
    decided_by: str | None = None
    why: str = ""
    tool_call_id: str = ""
    run_key: str = ""
    change_set_id: str | None = None
    item: int | None = None
    revision: int | None = None
    ran_url: str | None = None
    outcome_url: str | None = None
    reported: bool = False
    message: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def approved(self) -> bool:
        """Whether the call may run (with `args`)."""
        return self.status == "approved"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], *, timed_out: bool = False) -> "Decision":
        """The decision of the server's JSON (`timed_out`: the client stopped waiting)."""
        verdict = raw.get("decision")
        status = {"run": "approved", "deny": "rejected", "ask": "pending"}.get(
            str(verdict), "rejected"
        )
        if status == "pending" and timed_out:
            status = "timed_out"
        return cls(
            status=status,
            tool=str(raw.get("tool", "")),
            args=dict(raw.get("args") or {}),
            edited=bool(raw.get("edited", False)),
            reason=raw.get("reason"),
            decided_by=raw.get("decidedBy"),
            why=str(raw.get("why", "")),
            tool_call_id=str(raw.get("toolCallId", "")),
            run_key=str(raw.get("runKey", "")),
            change_set_id=raw.get("changeSetId"),
            item=raw.get("item"),
            revision=raw.get("revision"),
            ran_url=raw.get("ranUrl"),
            outcome_url=raw.get("outcomeUrl"),
            reported=bool(raw.get("reported", False)),
            message=str(raw.get("message", "")),
            raw=dict(raw),
        )


class Denied(Exception):
    """A gated call Assent did not approve (rejected, denied by a rule, or not decided
    in time): it did not run. `decision` says why."""

    def __init__(self, decision: Decision) -> None:
        why = decision.reason or decision.why or decision.status
        super().__init__(f"{decision.tool} did not run: {why}")
        self.decision = decision


def _jsonable(value: Any) -> Any:
    """`value` if JSON can hold it, else its text (a tool's result of any type)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _run(coroutine: Awaitable[T]) -> T:
    """Runs `coroutine` to its end from synchronous code, in a thread of its own when
    this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(cast(Any, coroutine))
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(cast(Any, coroutine)))
        except BaseException as caught:  # handed to the caller's thread
            error.append(caught)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


class Assent:
    """Assent's client for one client application (its agent token names the agent).

    `target` names what calls act on unless a call says otherwise; `timeout` is how
    long `propose` and `wait` wait for a person by default (seconds); `poll` the
    length of one long poll."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        target: str = "default",
        timeout: float = 600.0,
        poll: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.target = target
        self.timeout = timeout
        self.poll = max(1.0, min(poll, MAX_POLL))
        self._transport = transport

    def _client(self, read: float = 30.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx.Timeout(10.0, read=read),
            transport=self._transport,
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        read: float = 30.0,
    ) -> Any:
        url = urljoin(self.url, path.lstrip("/"))
        async with self._client(read) as client:
            try:
                response = await client.request(method, url, json=body, params=params)
            except httpx.HTTPError as error:
                raise AssentError(0, f"{method} {url}: {error}") from error
        if response.status_code >= 400:
            try:
                detail = str(response.json().get("detail", response.text))
            except ValueError:
                detail = response.text
            raise AssentError(response.status_code, detail)
        return response.json()

    async def propose(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        target: str | None = None,
        tool_call_id: str | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> Decision:
        """Proposes the call `tool(args)`: the rules' answer, or, with `wait` (the
        default) and a call that asks a person, the person's decision (`timed_out`
        when `timeout`, default the client's, ran out first). The same `tool_call_id`
        proposed again gets the same decision."""
        body: dict[str, Any] = {
            "tool": tool,
            "args": dict(args),
            "target": target or self.target,
            "executedBy": "client",
        }
        if tool_call_id is not None:
            body["toolCallId"] = tool_call_id
        decision = Decision.from_json(await self._request("POST", "/api/calls", body=body))
        if wait and decision.status == "pending":
            return await self.wait(decision, timeout)
        return decision

    async def decision(self, decision: Decision) -> Decision:
        """Where `decision` stands now (one look, no wait)."""
        if not decision.outcome_url:
            return decision
        return Decision.from_json(await self._request("GET", decision.outcome_url))

    async def wait(self, decision: Decision, timeout: float | None = None) -> Decision:
        """Awaits a person's decision about a pending call: approved or rejected as
        soon as a person decides (from any door), or `timed_out` after `timeout`
        seconds (default: the client's); the item then still waits, and a later
        `wait` gets the decision."""
        if decision.status not in ("pending", "timed_out") or not decision.outcome_url:
            return decision
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        current = decision
        while True:
            left = deadline - time.monotonic()
            seconds = int(max(0.0, min(left, self.poll)))
            raw = await self._request(
                "GET",
                current.outcome_url or "",
                params={"wait": str(seconds)},
                read=seconds + 30.0,
            )
            current = Decision.from_json(raw)
            if current.status != "pending":
                return current
            if deadline - time.monotonic() <= 0:
                return Decision.from_json(raw, timed_out=True)

    async def report(
        self,
        decision: Decision,
        ok: bool,
        result: Any = None,
        *,
        error: str | None = None,
        args: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Reports the run of an approved call: the arguments it ran with (by default
        the approved ones), whether it succeeded, its `result` or `error`. Refused
        (`AssentError` 409) for a call not approved, other arguments, or a second
        report."""
        if not decision.ran_url:
            raise AssentError(0, f"{decision.tool} has nowhere to report: it was not approved")
        body: dict[str, Any] = {
            "args": dict(decision.args if args is None else args),
            "ok": ok,
        }
        if ok:
            body["result"] = _jsonable(result)
        else:
            body["error"] = error if error is not None else str(result)
        return cast(dict[str, Any], await self._request("POST", decision.ran_url, body=body))

    def gate(
        self, tool: str, *, target: str | None = None, timeout: float | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A decorator: each call of the function is proposed as `tool` with its
        arguments by name, waits for the decision, runs with the approved arguments
        (a person's edit included) and is reported; a call not approved raises
        `Denied` and does not run. Works on plain and async functions."""

        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            signature = inspect.signature(function)

            def arguments(*a: Any, **kw: Any) -> dict[str, Any]:
                bound = signature.bind(*a, **kw)
                bound.apply_defaults()
                return dict(bound.arguments)

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def gated_async(*a: Any, **kw: Any) -> Any:
                    decision = await self.propose(
                        tool, arguments(*a, **kw), target=target, timeout=timeout
                    )
                    if not decision.approved:
                        raise Denied(decision)
                    try:
                        result = await function(**decision.args)
                    except Exception as failure:
                        await self.report(decision, False, error=str(failure))
                        raise
                    await self.report(decision, True, result)
                    return result

                return gated_async

            @functools.wraps(function)
            def gated(*a: Any, **kw: Any) -> Any:
                decision = _run(
                    self.propose(tool, arguments(*a, **kw), target=target, timeout=timeout)
                )
                if not decision.approved:
                    raise Denied(decision)
                try:
                    result = function(**decision.args)
                except Exception as failure:
                    _run(self.report(decision, False, error=str(failure)))
                    raise
                _run(self.report(decision, True, result))
                return result

            return gated

        return decorate

    def sync(self) -> "SyncAssent":
        """The same client, blocking."""
        return SyncAssent(self)


class SyncAssent:
    """`Assent`'s calls, blocking (for synchronous frameworks and scripts)."""

    def __init__(self, client: Assent) -> None:
        self.client = client

    def propose(
        self,
        tool: str,
        args: Mapping[str, Any],
        *,
        target: str | None = None,
        tool_call_id: str | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> Decision:
        """See `Assent.propose`."""
        return _run(
            self.client.propose(
                tool, args, target=target, tool_call_id=tool_call_id, wait=wait, timeout=timeout
            )
        )

    def decision(self, decision: Decision) -> Decision:
        """See `Assent.decision`."""
        return _run(self.client.decision(decision))

    def wait(self, decision: Decision, timeout: float | None = None) -> Decision:
        """See `Assent.wait`."""
        return _run(self.client.wait(decision, timeout))

    def report(
        self,
        decision: Decision,
        ok: bool,
        result: Any = None,
        *,
        error: str | None = None,
        args: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """See `Assent.report`."""
        return _run(self.client.report(decision, ok, result, error=error, args=args))

    def gate(
        self, tool: str, *, target: str | None = None, timeout: float | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """See `Assent.gate`."""
        return self.client.gate(tool, target=target, timeout=timeout)
