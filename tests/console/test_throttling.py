"""API throttles: sign-in for a token (per username, per address), every call (per person,
per address), all counted in the shared cache: 429 with Retry-After in the error format."""

from __future__ import annotations

import httpx
import pytest
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from rest_framework.test import APIClient

from tests.support.api_auth import api_auth_header
from tests.support.fixtures import processes  # noqa: F401
from tests.support.throttling import PROCESS_RATES, throttle_rates

pytestmark = pytest.mark.usefixtures("queued")


def _attempt(api: APIClient, username: str = "alice", password: str = "wrong", **meta: str):
    body = {"username": username, "password": password}
    return api.post("/api/auth/token/", body, format="json", **meta)


def test_the_sixth_wrong_password_for_a_username_gets_429(api, settings, alice):
    throttle_rates(settings, token_username="5/minute")

    answers = [_attempt(api).status_code for _ in range(6)]

    assert answers == [400] * 5 + [429]
    response = _attempt(api, password="demo")  # even the right password waits
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert set(response.json()) == {"detail", "errors"}


def test_the_username_limit_holds_from_any_address(api, settings, alice):
    throttle_rates(settings, token_username="2/minute")
    for address in ("10.0.0.1", "10.0.0.2"):
        _attempt(api, REMOTE_ADDR=address)

    assert _attempt(api, REMOTE_ADDR="10.0.0.3").status_code == 429
    assert _attempt(api, username="bob", REMOTE_ADDR="10.0.0.3").status_code == 400


def test_the_address_limit_counts_every_username(api, settings, db):
    throttle_rates(settings, token_ip="3/minute")

    answers = [_attempt(api, username=f"user{n}").status_code for n in range(4)]

    assert answers == [400, 400, 400, 429]


def test_a_forged_x_forwarded_for_does_not_escape_the_address_limit(api, settings, db):
    throttle_rates(settings, token_ip="2/minute")

    answers = [
        _attempt(api, username=f"user{n}", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").status_code
        for n in range(3)
    ]

    assert answers == [400, 400, 429]


def test_a_hundred_attempts_do_not_pass_with_the_default_rates(api, settings, alice):
    settings.API_THROTTLE_RATES = settings.API_THROTTLE_RATES | {
        "token_ip": "20/minute",
        "token_username": "5/minute",
    }

    answers = {_attempt(api).status_code for _ in range(100)}

    assert 429 in answers


def test_every_api_call_of_a_person_is_limited(settings, alice):
    throttle_rates(settings, user="3/minute")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=api_auth_header(alice)["Authorization"])

    answers = [client.get("/api/runs/").status_code for _ in range(4)]

    assert answers == [200, 200, 200, 429]
    assert "Retry-After" in client.get("/api/runs/")


def test_anonymous_calls_of_public_endpoints_are_limited_by_address(api, settings, db):
    throttle_rates(settings, anon="1/minute")

    answers = [api.get("/api/schema/").status_code for _ in range(2)]

    assert answers == [200, 429]


def test_the_default_cache_is_the_database_cache(settings):
    assert isinstance(caches["default"], DatabaseCache)


@pytest.mark.durability
def test_another_process_sees_the_count(processes, settings, alice):  # noqa: F811
    """Attempts counted here (this process) are refused by a real web server (another one)."""
    env = PROCESS_RATES | {"API_THROTTLE_TOKEN_USERNAME": "3/minute"}
    web = processes.web(env=env)
    throttle_rates(settings, token_username="3/minute")
    api = APIClient()
    assert [_attempt(api).status_code for _ in range(3)] == [400] * 3

    response = httpx.post(
        f"{web.base_url}/api/auth/token/",
        json={"username": "alice", "password": "demo"},
        timeout=15.0,
    )

    assert response.status_code == 429, response.text
    assert int(response.headers["Retry-After"]) > 0
    assert set(response.json()) == {"detail", "errors"}


def test_a_username_sent_as_a_json_number_is_throttled_like_its_text(api, settings, db):
    # The serializer's CharField accepts 1234 as "1234" and authenticate() looks it up; the
    # username throttle must count it too, or numeric usernames have no per-username limit.
    from tests.support.people import person

    person("1234")
    throttle_rates(settings, token_username="2/minute")

    answers = [
        _attempt(api, username=1234, REMOTE_ADDR=f"10.8.0.{n}").status_code for n in range(3)
    ]

    assert answers == [400, 400, 429]


def test_behind_a_trusted_proxy_the_audit_records_the_address_the_limits_count(
    api, settings, alice
):
    # TRUSTED_PROXY_COUNT makes the throttles and the lock-out read X-Forwarded-For; the
    # audit event of the same request wrote REMOTE_ADDR, the proxy's address, for everyone.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    from audit.models import AuditEvent

    response = api.post(
        "/api/auth/token/",
        {"username": "alice", "password": "demo"},
        format="json",
        REMOTE_ADDR="10.0.0.1",  # the proxy
        HTTP_X_FORWARDED_FOR="198.51.100.23",
    )

    assert response.status_code == 200
    assert AuditEvent.objects.get(action="token.created").ip == "198.51.100.23"
