"""Throttles and the login lock-out, kept out of the way of the tests that are not about them.

Every test starts with an empty cache (the database cache outlives a transactional test's
flush) and rates far above what one test does; a throttle test sets its own low rates with
``throttle_rates(settings, ...)``. Real processes get the same high rates (``PROCESS_RATES``),
unless a test passes its own in ``env``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

HIGH = "100000/minute"
SCOPES = ("user", "anon", "token_ip", "token_username", "decide")
PROCESS_RATES = {f"API_THROTTLE_{scope.upper()}": HIGH for scope in SCOPES} | {
    "LOGIN_LOCKOUT_FAILURES": "1000"
}
_DB_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
}


def throttle_rates(settings: Any, **rates: str) -> None:
    """Set some rates (``decide="2/minute"``) for this test, keeping the others."""
    settings.API_THROTTLE_RATES = {**settings.API_THROTTLE_RATES, **rates}


@pytest.fixture(autouse=True)
def _throttles_out_of_the_way(request: pytest.FixtureRequest, settings: Any) -> None:
    settings.API_THROTTLE_RATES = dict.fromkeys(SCOPES, HIGH)
    settings.LOGIN_LOCKOUT_FAILURES = 1000
    if _DB_FIXTURES & set(request.fixturenames) or request.node.get_closest_marker("django_db"):
        request.getfixturevalue("_django_db_helper")
        cache.clear()
