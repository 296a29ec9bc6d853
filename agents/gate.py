"""Kept for agent authors (the README documents it): see ``agents.hitl.gate``."""

from agents.hitl.gate import DecisionError, approval_gate, gate_payload

__all__ = ["DecisionError", "approval_gate", "gate_payload"]
