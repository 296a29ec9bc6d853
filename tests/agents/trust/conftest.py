"""Trust tests use the runtime's small test agent."""

from tests.agents.runtime.conftest import note_agent  # noqa: F401
