"""The whole suite's plugins: the people of README.md, probe agents, a recorded task queue,
the audit purge, the hypothesis profiles.

People (tests/support/people.py): alice requests runs, bob approves "write", carol approves
"critical", dave may approve nothing, erin is a manager, frank a compliance officer. Rows come
from the factories in tests/support/factories.py. Probe agents (tests/support/probes.py):
``api_probe`` and ``page_probe``, registered but never built.
"""

from __future__ import annotations

import pytest

pytest_plugins = [
    # Lets the test flush empty the append-only audit table (see tests/audit_purge.py).
    "tests.audit_purge",
    # Hypothesis profiles "ci" (default) and "soak", chosen by HYPOTHESIS_PROFILE.
    "tests.support.hypothesis_profiles",
    "tests.support.people",
    "tests.support.probes",
    "tests.support.queue",
    # An empty cache and high rates for every test; throttle tests set their own.
    "tests.support.throttling",
]


@pytest.fixture(scope="session", autouse=True)
def _close_checkpointer_before_db_teardown(django_db_setup, django_db_blocker):
    """The checkpointer's pool holds connections to the test database; close it first."""
    yield
    from agents.runtime.checkpoint import checkpointer_reset

    checkpointer_reset()
