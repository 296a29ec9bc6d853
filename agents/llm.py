"""Kept for agent code written against the older path (the README once documented it): the
public names of ``agents.runtime.llm``."""

from agents.runtime.llm import *  # noqa: F403
