"""An OpenAI Agents SDK agent whose tool calls Assent decides: a call that asks
interrupts the run until a person decides, then the run resumes with the SDK's
approve or reject, and the tool runs with the approved arguments."""

import asyncio
import json
import os
import uuid

from agents import Agent, Model, ModelResponse, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from assent import Assent
from assent.adapters.openai_agents import AssentApprovals

assent = Assent(os.environ["ASSENT_URL"], os.environ["ASSENT_TOKEN"])
approvals = AssentApprovals(assent)


@function_tool
def refund(order: str, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents} cents on {order}"


class ScriptedModel(Model):
    # Your model goes here (the SDK's default is OpenAI's); this one asks for one
    # refund, then repeats what the tool said.
    async def get_response(self, system_instructions, input, *args, **kwargs):
        said = [
            item["output"]
            for item in input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if said:
            text = ResponseOutputText(type="output_text", text=str(said[-1]), annotations=[])
            output = [
                ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        else:
            arguments = json.dumps({"order": "A-17", "cents": 4200})
            output = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=uuid.uuid4().hex, name="refund", arguments=arguments
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


set_tracing_disabled(True)  # the scripted model sends nothing to OpenAI
agent = Agent(name="shop", model=ScriptedModel(), tools=approvals.tools([refund]))


async def main() -> None:
    result = await approvals.run(agent, "Refund order A-17")
    print(result.final_output)


asyncio.run(main())
