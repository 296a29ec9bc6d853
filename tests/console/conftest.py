"""Fixtures for the tests of the console as a whole (API auth and schema, hostile input,
settings, the metrics page, the management commands)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api() -> APIClient:
    """An anonymous client of the JSON API."""
    return APIClient()


# The demo policy (tiers read / write / critical, bob and carol in their groups), shared with
# the approvals tests.
from tests.approvals.conftest import demo_policy  # noqa: E402, F401
