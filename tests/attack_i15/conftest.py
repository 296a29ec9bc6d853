"""The remote service's fixtures (demo policy, an agent with a key, a recorded queue)."""

from tests.agents.remote.conftest import (  # noqa: F401
    _nothing_runs,
    agent,
    agent_key,
    demo_policy,
    queue_modules,
)
