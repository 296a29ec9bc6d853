"""The metrics tests' data set (tests/support/metrics.py); erin the manager is one of the
shared people (tests/support/people.py)."""

from __future__ import annotations

import pytest

from tests.support.metrics import NOW, MetricsData, metrics_data_build


@pytest.fixture
def metrics_data(alice, bob, carol) -> MetricsData:
    return metrics_data_build(now=NOW, requester=alice, bob=bob, carol=carol)
