"""Kept for agent code written against the older path (the README once documented it): the
public names of ``agents.runtime.registry``."""

from agents.runtime.registry import *  # noqa: F403
