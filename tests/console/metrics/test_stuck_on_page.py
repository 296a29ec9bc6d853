"""The managers' metrics page lists what is stuck now (open items only), linking each run."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from approvals.models import StuckItem
from tests.support.factories import RunFactory
from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def test_the_page_lists_open_stuck_items_and_links_their_runs(erin, alice):
    run = RunFactory(requested_by=alice)
    now = timezone.now()
    StuckItem.objects.create(
        kind=StuckItem.Kind.ORPHANED_INTERRUPT,
        key=str(run.pk),
        run=run,
        detail="waits with no pending approval",
        raised_at=now,
    )
    StuckItem.objects.create(
        kind=StuckItem.Kind.QUEUE_TOO_OLD,
        key="write",
        detail="old queue",
        raised_at=now - dt.timedelta(hours=2),
        cleared_at=now - dt.timedelta(hours=1),
    )
    page = client_for(erin).get("/metrics/").content.decode()
    assert f'data-stuck="orphaned_interrupt:{run.pk}"' in page
    assert f'href="/runs/{run.pk}/"' in page
    assert 'data-stuck="queue_too_old:write"' not in page  # cleared
    assert 'data-metric="stuck">1<' in page


def test_the_page_says_nothing_is_stuck_when_nothing_is(erin):
    page = client_for(erin).get("/metrics/").content.decode()
    assert "Nothing is stuck." in page
    assert 'data-metric="stuck">0<' in page
