"""A LangGraph agent whose tool calls Assent decides: a call that asks pauses the graph
(LangGraph's `interrupt`) until a person decides, then the graph resumes with
`Command(resume=…)` and the tool runs with the approved arguments."""

import asyncio
import os
import uuid

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from assent import Assent
from assent.adapters.langgraph import resume_until_decided, tool_node

assent = Assent(os.environ["ASSENT_URL"], os.environ["ASSENT_TOKEN"])


@tool
def refund(order: str, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents} cents on {order}"


def model(state: MessagesState) -> dict:
    # Your chat model goes here (`ChatOpenAI(...).bind_tools([refund])`); this one
    # asks for one refund, then repeats what the tool said.
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(str(last.content))]}
    call = {"name": "refund", "args": {"order": "A-17", "cents": 4200}, "id": uuid.uuid4().hex}
    return {"messages": [AIMessage("", tool_calls=[call])]}


builder = StateGraph(MessagesState)
builder.add_node("model", model)
builder.add_node("tools", tool_node([refund], assent))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
builder.add_edge("tools", "model")
graph = builder.compile(checkpointer=InMemorySaver())


async def main() -> None:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    state = await resume_until_decided(
        graph, {"messages": [HumanMessage("Refund order A-17")]}, config, assent
    )
    print(state["messages"][-1].content)


asyncio.run(main())
