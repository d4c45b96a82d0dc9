"""A Pydantic AI agent whose tool calls Assent decides: a call that asks is deferred
until a person decides, then the run resumes with `DeferredToolResults` built from the
decision, and the tool runs with the approved arguments."""

import asyncio
import os
import uuid

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from assent import Assent
from assent.adapters.pydantic_ai import AssentDeferred

assent = Assent(os.environ["ASSENT_URL"], os.environ["ASSENT_TOKEN"])
deferred = AssentDeferred(assent)


def refund(order: str, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents} cents on {order}"


def model(messages, info) -> ModelResponse:
    # Your model goes here (`Agent("openai:gpt-5", …)`); this one asks for one refund,
    # then repeats what the tool said.
    last = messages[-1]
    if isinstance(last, ModelRequest):
        said = [part.content for part in last.parts if isinstance(part, ToolReturnPart)]
        if said:
            return ModelResponse(parts=[TextPart(str(said[-1]))])
    call = ToolCallPart("refund", {"order": "A-17", "cents": 4200}, tool_call_id=uuid.uuid4().hex)
    return ModelResponse(parts=[call])


agent = Agent(
    FunctionModel(model),
    output_type=[str, DeferredToolRequests],
    toolsets=[deferred.toolset([refund])],
)


async def main() -> None:
    result = await deferred.run(agent, "Refund order A-17")
    print(result.output)


asyncio.run(main())
