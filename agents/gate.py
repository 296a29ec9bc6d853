"""Kept for agent code written against the older path (the README once documented it): the
public names of ``agents.hitl.gate``."""

from agents.hitl.gate import *  # noqa: F403
