"""Kept for agent code written against the older path (the README once documented it): the
public names of ``agents.hitl.middleware`` and ``agents.hitl.console_tool``."""

from agents.hitl.console_tool import *  # noqa: F403
from agents.hitl.middleware import *  # noqa: F403
