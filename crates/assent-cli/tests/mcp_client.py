"""The official Python MCP client in front of `assent mcp`, for the gateway's tests: the
`mcp` package from PyPI (the Python SDK, not Assent's code), whose `ClientSession`
checks every successful tool result against the tool's `outputSchema` as listed.

Usage: python mcp_client.py PLAN_JSON

PLAN_JSON: {"command": "...", "args": ["..."], "calls": [{"tool": "...", "arguments": {...}}]}
    starts COMMAND ARGS over stdio (the gateway, which starts its upstream), or with
    {"url": "...", "headers": {...}} instead of command and args connects to the gateway
    over Streamable HTTP; lists the tools, makes each call in order and prints one JSON object on stdout:
    {"tools": [{"name", "description", "outputSchema", "annotations"}],
     "calls": [{"isError", "text", "structuredContent", "progress"} or {"clientError"}]}
    A client-side error (an invalid result, a protocol error) is caught and reported as
    the call's "clientError", so the test that runs this script can assert there is none.
    A call's report also has "meta" (the result's `_meta`).

    With "elicit": {"action": "accept"|"decline"|"cancel", "content": {...}} the client
    declares `elicitation` and answers every form so (an `elicitation_callback`); the
    report's "elicited" lists each form asked ({"message", "requestedSchema"}).
    Without it the client declares no elicitation.

    Other steps: {"run": ["PROGRAM", "ARG", ...]} runs a command (a person deciding with
    the CLI) and reports {"exit": CODE}. In a step, the text "{changeSetId}" stands for
    the `assent/changeSetId` of the latest call answered with one. A call with
    "until": {"KEY": VALUE} is repeated (every 0.2 s, for at most 10 s) until its
    structuredContent's KEY is VALUE.
"""

import asyncio
import json
import subprocess
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(session, step):
    progress = []

    async def on_progress(value, total, message):
        progress.append(message or str(value))

    try:
        result = await session.call_tool(
            step["tool"], step.get("arguments") or {}, progress_callback=on_progress
        )
    except Exception as error:  # noqa: BLE001 - every client-side failure is reported
        return {"clientError": f"{type(error).__name__}: {error}"}
    return {
        "isError": bool(result.is_error),
        "text": text_of(result),
        "structuredContent": result.structured_content,
        "progress": len(progress),
        "meta": result.meta,
    }


def substituted(step, change_set_id):
    if change_set_id is None:
        return step
    return json.loads(json.dumps(step).replace("{changeSetId}", change_set_id))


async def run_step(session, step):
    if "run" in step:
        done = subprocess.run(step["run"], capture_output=True, text=True, timeout=60)
        return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    until = step.get("until")
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        answer = await call(session, step)
        structured = answer.get("structuredContent") or {}
        if not until or all(structured.get(key) == value for key, value in until.items()):
            return answer
        if asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.2)


def connect(plan):
    if "url" in plan:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=plan.get("headers") or {})
        return streamable_http_client(plan["url"], http_client=client)
    return stdio_client(StdioServerParameters(command=plan["command"], args=plan["args"]))


async def main(plan):
    elicited = []
    options = {}
    if "elicit" in plan:
        from mcp import types

        async def on_elicit(context, params):
            elicited.append({
                "message": params.message,
                "requestedSchema": getattr(params, "requested_schema", None),
            })
            return types.ElicitResult(
                action=plan["elicit"]["action"], content=plan["elicit"].get("content")
            )

        options["elicitation_callback"] = on_elicit
    async with connect(plan) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, **options) as session:
            await session.initialize()
            listed = await session.list_tools()
            tools = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "outputSchema": tool.output_schema,
                    "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True)
                    if tool.annotations
                    else None,
                }
                for tool in listed.tools
            ]
            calls = []
            change_set_id = None
            for step in plan["calls"]:
                answer = await run_step(session, substituted(step, change_set_id))
                calls.append(answer)
                meta = answer.get("meta") or {}
                change_set_id = meta.get("assent/changeSetId") or change_set_id
    print(json.dumps({"tools": tools, "calls": calls, "elicited": elicited}, default=str))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
