"""The lock-out counts failures in a window of LOGIN_LOCKOUT_WINDOW_SECONDS (900 by default),
but the database cache's ``incr`` is Django's ``get`` + ``set`` with the cache's default
timeout (300 s): every failure after the first cut the counter's life to 300 s. Four tries,
a pause of 301 s, four more, and so on: twelve guesses per window of 900 s, never locked."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean():
    cache.clear()
    yield
    cache.clear()


def _login(client: Client):
    return client.post("/login/", {"username": "alice", "password": "wrong"})


def test_five_failures_within_the_window_lock_even_with_a_pause_over_300_s(settings, alice):
    settings.LOGIN_LOCKOUT_FAILURES = 5
    settings.LOGIN_LOCKOUT_WINDOW_SECONDS = 900
    settings.LOGIN_LOCKOUT_SECONDS = 900
    start = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)
    browser = Client()
    with time_machine.travel(start, tick=False):
        assert [_login(browser).status_code for _ in range(4)] == [200] * 4
    with time_machine.travel(start + dt.timedelta(seconds=301), tick=False):
        # The fifth failure, 301 s after the first: well within the window of 900 s.
        assert _login(browser).status_code == 429
