"""The remote service's fixtures (tests/agents/remote/conftest.py): the demo policy, an
external agent with a key, a recorded task queue."""

from tests.agents.remote.conftest import (  # noqa: F401
    _nothing_runs,
    agent,
    agent_key,
    demo_policy,
    queue_modules,
)
