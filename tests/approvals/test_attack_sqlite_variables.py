"""Attack: a sweep chunk's rollups in one statement per 500 cells (8 variables each) on an
SQLite built with the 999-variable limit Django assumes (features.max_query_params): before,
one closed approval wrote at most ~51 cells; a chunk of expiries of many tools writes ~1000.
The chunk fails on every pass, so those approvals never expire and their runs never wake."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approvals_sweep
from tests.support.approvals import request_approval

pytestmark = [
    pytest.mark.usefixtures("queued"),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's variable limit"),
]


def test_a_chunk_of_varied_expiries_fits_sqlites_999_variables(demo_policy, alice):
    past = timezone.now() - dt.timedelta(seconds=1)
    for n in range(40):
        approval = request_approval(requester=alice, tier="write", tool=f"tool_{n}")
        ApprovalRequest.objects.filter(pk=approval.pk).update(expires_at=past)
    connection.ensure_connection()
    limit = connection.features.max_query_params
    assert limit == 999
    old = connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    try:
        assert approvals_sweep()["expired"] == 40
    finally:
        connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, old)
    assert ApprovalRequest.objects.filter(status="expired").count() == 40
