"""Adapters that put a gate in front of an agent framework's tool calls (docs/integrations.md,
"Agent frameworks"): `openai_agents` (the OpenAI Agents SDK, extra `openai-agents`) and `langgraph`
(extra `langgraph`), over `calls`, the part both share. Each imports its framework; the client never
imports them."""
