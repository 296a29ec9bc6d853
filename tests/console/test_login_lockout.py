"""/login/ locks a username (and an address) out after too many failures: 429, Retry-After,
a clear message; it ends on its own, and a success forgets the username's failures."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone


@pytest.fixture
def lockout(settings):
    settings.LOGIN_LOCKOUT_FAILURES = 5
    settings.LOGIN_LOCKOUT_WINDOW_SECONDS = 60
    settings.LOGIN_LOCKOUT_SECONDS = 900
    return settings


def _login(client: Client, username: str = "alice", password: str = "wrong", **meta: str):
    return client.post("/login/", {"username": username, "password": password}, **meta)


def test_the_fifth_wrong_password_in_a_minute_locks_the_username_out(lockout, alice):
    browser = Client()

    answers = [_login(browser).status_code for _ in range(5)]
    locked = _login(browser, password="demo")

    assert answers == [200, 200, 200, 200, 429]
    assert locked.status_code == 429
    assert 0 < int(locked["Retry-After"]) <= 900
    assert "Too many failed attempts. Try again in about 15 minutes." in locked.content.decode()
    assert "_auth_user_id" not in browser.session


def test_the_lock_holds_from_another_address_and_spares_other_usernames(lockout, alice, bob):
    for n in range(5):
        _login(Client(), REMOTE_ADDR=f"10.0.0.{n}")

    assert _login(Client(), password="demo", REMOTE_ADDR="10.0.9.9").status_code == 429
    assert _login(Client(), "bob", "demo", REMOTE_ADDR="10.0.9.9").status_code == 302


def test_failures_from_one_address_lock_that_address_for_every_username(lockout, db):
    for n in range(5):
        _login(Client(), username=f"user{n}", REMOTE_ADDR="203.0.113.7")

    assert _login(Client(), username="someone", REMOTE_ADDR="203.0.113.7").status_code == 429
    assert _login(Client(), username="someone", REMOTE_ADDR="203.0.113.8").status_code == 200


def test_the_lock_out_ends_after_its_time(lockout, alice):
    for _ in range(5):
        _login(Client())

    with time_machine.travel(timezone.now() + dt.timedelta(seconds=901)):
        assert _login(Client(), password="demo").status_code == 302


def test_a_success_forgets_the_usernames_failures(lockout, alice):
    for n in range(4):
        _login(Client(), REMOTE_ADDR=f"10.1.0.{n}")
    assert _login(Client(), password="demo", REMOTE_ADDR="10.1.1.1").status_code == 302

    answers = [_login(Client(), REMOTE_ADDR=f"10.2.0.{n}").status_code for n in range(4)]

    assert answers == [200] * 4


def test_the_admin_login_sends_people_to_the_login_page(db):
    response = Client().get("/admin/login/?next=/admin/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/admin/"
