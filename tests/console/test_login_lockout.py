"""/login/ locks a username (and an address) out after too many failures: 429, Retry-After,
a clear message; it ends on its own, and a success forgets the username's failures."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient


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


# --- attacks (review of issue 12) -------------------------------------------------------------


def test_a_locked_username_stays_locked_when_typed_in_fullwidth_letters(lockout, alice):
    # The login form signs in with NFKC(username) (Django's UsernameField), so "ａｌｉｃｅ" is
    # alice: the lock must be counted on that same name, or each variant gets fresh tries.
    for n in range(5):
        _login(Client(), REMOTE_ADDR=f"10.4.0.{n}")

    variant = _login(Client(), username="ａｌｉｃｅ", password="demo", REMOTE_ADDR="10.4.9.9")

    assert variant.status_code == 429


def test_fullwidth_variants_of_a_username_share_its_failure_count(lockout, alice):
    variants = ["alice", "ａlice", "aｌice", "alｉce", "aliｃe"]
    for n, name in enumerate(variants):
        _login(Client(), username=name, REMOTE_ADDR=f"10.5.0.{n}")

    assert _login(Client(), password="demo", REMOTE_ADDR="10.5.9.9").status_code == 429


def test_a_username_locked_at_the_login_page_gets_no_api_token_either(lockout, alice):
    # /api/auth/token/ checks the same password: if it ignores the lock-out, the lock only
    # moves the guessing to the API (5/minute per username there, not 5 per 15 minutes).
    for n in range(5):
        _login(Client(), REMOTE_ADDR=f"10.6.0.{n}")

    response = APIClient().post(
        "/api/auth/token/",
        {"username": "alice", "password": "demo"},
        format="json",
        REMOTE_ADDR="10.6.9.9",
    )

    assert response.status_code == 429
    assert "Retry-After" in response


def test_failed_api_token_attempts_count_toward_the_login_lock_out(lockout, alice):
    for n in range(5):
        APIClient().post(
            "/api/auth/token/",
            {"username": "alice", "password": "wrong"},
            format="json",
            REMOTE_ADDR=f"10.7.0.{n}",
        )

    assert _login(Client(), password="demo", REMOTE_ADDR="10.7.9.9").status_code == 429


def test_a_flood_of_other_usernames_does_not_evict_a_lock_out_from_the_cache(lockout, alice):
    # Django's database cache keeps MAX_ENTRIES (300 by default) rows and, past that, culls
    # a third of them in key order: ":1:login-lock:..." sorts before ":1:throttle_...", so
    # the locks go first. Anyone who can make ~300 cache rows (one per username tried at
    # /api/auth/token/, 20 a minute per address) would lift the lock on alice.
    # Cheap hashing of the unknown usernames' passwords (alice's hash keeps its own hasher).
    lockout.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        *lockout.PASSWORD_HASHERS,
    ]
    for n in range(5):
        _login(Client(), REMOTE_ADDR=f"10.9.0.{n}")
    api = APIClient()
    for n in range(320):
        api.post(
            "/api/auth/token/",
            {"username": f"nobody{n}", "password": "x"},
            format="json",
            REMOTE_ADDR=f"10.10.{n // 200}.{n % 200}",
        )

    assert _login(Client(), password="demo", REMOTE_ADDR="10.11.0.1").status_code == 429
