"""Adapters of Assent into the agent frameworks' own approval seams, one module each
(each imports its framework only when imported itself): `langgraph`,
`openai_agents`, `pydantic_ai`."""
