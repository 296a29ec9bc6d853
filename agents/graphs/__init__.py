"""The built-in demo agents; importing this package registers them (``AgentsConfig.ready``)."""

from agents.graphs.incident_copilot import graph as incident_copilot
from agents.graphs.refund_agent import graph as refund_agent

__all__ = ["incident_copilot", "refund_agent"]
