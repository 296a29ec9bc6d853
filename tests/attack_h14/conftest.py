"""Fixtures of the erasure suite, reused by the hostile review of issue 14."""

from tests.agents.erasure.conftest import driven  # noqa: F401
from tests.agents.runtime.conftest import note_agent  # noqa: F401
