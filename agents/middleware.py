"""Kept for agent authors (the README documents it): the public names of ``agents.hitl``."""

from agents.hitl import *  # noqa: F403
from agents.hitl import __all__  # noqa: F401
