"""ask-another inside the agent frameworks people use, over the asyncio face (`ask_another.aio`).

Each adapter is an optional extra and a module of its own, imported only by whoever uses it:

- `ask_another.adapters.openai_agents` (`pip install 'ask-another[openai-agents]'`): function
  tools for the OpenAI Agents SDK, its tool-approval interruptions answering a research job's
  permission requests;
- `ask_another.adapters.pydantic_ai` (`ask-another[pydantic-ai]`): a pydantic-ai toolset, its
  deferred tool approvals answering them;
- `ask_another.adapters.langgraph` (`ask-another[langgraph]`): LangGraph nodes, a job's
  permission requests put to the person with `interrupt()`.

What they share (a job waited on until it ends or asks a person, and the words for it) is
`_jobs.py`. See docs/interaction.md, "Agent frameworks".
"""
