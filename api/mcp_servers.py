"""The MCP servers the gate serves over HTTP, built once per app by its composition (`api.app`):
`all` exposes the four policy-check tools and the held-action tool (`api.mcp_holds`), and one
server per service (`refund`, `cancellation`, `return`, `trial`) exposes that service's tool."""

from __future__ import annotations

from api import mcp_holds
from api.mcp import ExtraTool, McpEndpoint
from gate.services.policychecks import CHECKS, PolicyCheckService


def mcp_servers(checks: PolicyCheckService) -> dict[str, McpEndpoint]:
    """Each MCP server by its key ("all" or a service), over `checks`."""
    held = {mcp_holds.TOOL: ExtraTool(mcp_holds.DEFINITION, mcp_holds.call, mcp_holds.ToolRefused)}
    return {
        "all": McpEndpoint(checks, tuple(spec.tool for spec in CHECKS), "decision-gate-policy-checks",
                           "Decision Gate policy checks", held),
        **{spec.service: McpEndpoint(checks, (spec.tool,), f"decision-gate-{spec.service}-check",
                                     f"Decision Gate {spec.title}") for spec in CHECKS},
    }
