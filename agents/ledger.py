"""Kept for agent code written against the older path (the README once documented it): the
public names of ``agents.effects`` (ledger, compensation, errors)."""

from agents.effects.compensation import *  # noqa: F403
from agents.effects.errors import *  # noqa: F403
from agents.effects.ledger import *  # noqa: F403
