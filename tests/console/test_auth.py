"""Who may call the API: tokens, sessions (with CSRF on writes), anonymous visitors."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone
from knox.crypto import hash_token

from audit.models import AuditEvent
from console.models import ApiToken
from tests.support.api_auth import api_auth_header

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs


def _obtain(api, username="alice", password="demo", **extra):
    body = {"username": username, "password": password, **extra}
    return api.post("/api/auth/token/", body, format="json")


def test_token_endpoint_returns_a_token_that_authenticates_requests(api, alice):
    response = _obtain(api, name="laptop CLI")

    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "laptop CLI"
    assert body["token"].startswith(body["token_key"])
    api.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    assert api.get("/api/runs/").status_code == 200


def test_a_token_is_stored_only_as_a_hash_of_its_secret(api, alice):
    secret = _obtain(api).json()["token"]

    (row,) = ApiToken.objects.filter(user=alice)
    stored = [str(value) for value in ApiToken.objects.filter(pk=row.pk).values().get().values()]
    assert secret not in stored
    assert row.digest == hash_token(secret)


def test_asking_twice_gives_two_tokens_one_per_device(api, alice):
    first = _obtain(api, name="laptop").json()["token"]
    second = _obtain(api, name="ci").json()["token"]

    assert first != second
    assert sorted(ApiToken.objects.filter(user=alice).values_list("name", flat=True)) == [
        "ci",
        "laptop",
    ]


def test_a_token_older_than_its_ttl_is_refused_with_401(api, alice, settings):
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": dt.timedelta(hours=2)}
    secret = _obtain(api).json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")

    with time_machine.travel(timezone.now() + dt.timedelta(hours=2, minutes=1)):
        response = api.get("/api/runs/")

    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token.", "errors": {}}
    assert not ApiToken.objects.filter(user=alice).exists()


def test_a_token_expires_after_api_token_ttl_hours_by_default(api, alice, settings):
    before = timezone.now()
    expiry = dt.datetime.fromisoformat(_obtain(api).json()["expiry"])

    ttl = dt.timedelta(hours=settings.API_TOKEN_TTL_HOURS)
    assert before + ttl <= expiry <= timezone.now() + ttl


def test_a_revoked_token_is_refused_with_401(api, alice):
    secret = _obtain(api).json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    key = api.get("/api/auth/tokens/").json()[0]["token_key"]

    assert api.delete(f"/api/auth/tokens/{key}/").status_code == 204
    response = api.get("/api/runs/")

    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."


def test_my_tokens_are_listed_without_their_secrets_and_with_their_last_use(api, alice, bob):
    secret = _obtain(api, name="laptop").json()["token"]
    _obtain(api, name="phone")
    _obtain(api, username="bob", name="bob's")
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")

    listed = api.get("/api/auth/tokens/").json()

    assert [row["name"] for row in listed] == ["phone", "laptop"]
    assert set(listed[0]) == {"token_key", "name", "created", "expiry", "last_used_at"}
    assert secret not in str(listed)
    assert listed[1]["last_used_at"] is not None  # this very call used it
    assert listed[0]["last_used_at"] is None


def test_revoke_all_ends_every_token_of_mine_and_no_one_elses(api, alice, bob):
    mine = [_obtain(api, name=name).json()["token"] for name in ("a", "b")]
    bobs = _obtain(api, username="bob").json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {mine[0]}")

    response = api.delete("/api/auth/tokens/")

    assert response.status_code == 200
    assert response.json() == {"revoked": 2}
    for secret, status in ((mine[1], 401), (bobs, 200)):
        api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        assert api.get("/api/runs/").status_code == status
    assert AuditEvent.objects.filter(action="token.revoked", actor_username="alice").count() == 1


def test_someone_elses_token_cannot_be_revoked(api, alice, bob):
    _obtain(api, username="bob")
    bobs_key = ApiToken.objects.get(user=bob).token_key
    api.credentials(**api_auth_credentials(alice))

    response = api.delete(f"/api/auth/tokens/{bobs_key}/")

    assert response.status_code == 404
    assert response.json() == {"detail": "No such token.", "errors": {}}
    assert ApiToken.objects.filter(user=bob).exists()


def test_token_endpoint_refuses_a_wrong_password_with_400(api, alice):
    response = _obtain(api, password="nope")

    assert response.status_code == 400
    assert response.json()["errors"] == {"non_field_errors": "wrong username or password"}
    assert not ApiToken.objects.filter(user=alice).exists()


def test_token_endpoint_names_a_missing_password(api, alice):
    response = api.post("/api/auth/token/", {"username": "alice"}, format="json")

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"password"}


def test_an_unknown_token_is_refused_with_401(api, alice):
    api.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")

    response = api.get("/api/runs/")

    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."


def test_api_auth_header_gives_a_working_token(api, alice):
    api.credentials(**api_auth_credentials(alice))

    assert api.get("/api/runs/").status_code == 200


def api_auth_credentials(user):
    return {"HTTP_AUTHORIZATION": api_auth_header(user)["Authorization"]}


def test_session_login_authenticates_api_requests(alice):
    browser = Client()
    assert browser.login(username="alice", password="demo")

    response = browser.get("/api/runs/")

    assert response.status_code == 200
    assert response.json()["results"] == []


def test_anonymous_requests_get_the_error_shape(api, db):
    response = api.get("/api/runs/")

    assert response.status_code in (401, 403)
    assert response.json() == {
        "detail": "Authentication credentials were not provided.",
        "errors": {},
    }


def test_session_writes_need_the_csrf_token(alice, api_probe):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    body = {"agent": "api_probe", "input": {"service": "a", "signal": "b", "severity": "sev3"}}

    response = browser.post("/api/runs/", body, content_type="application/json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


@pytest.mark.parametrize("secret", ["\xff\xfe", "not-hex-" * 8, "0" * 15 + "\x00"])
def test_a_malformed_token_is_refused_with_401(api, alice, secret):
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")

    response = api.get("/api/runs/")

    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token.", "errors": {}}


@pytest.mark.parametrize("key", ["%00", "not-a-key", "%F0%9F%94%91", "a" * 300])
def test_revoking_a_token_key_that_cannot_exist_is_404(api, alice, key):
    api.credentials(**api_auth_credentials(alice))

    response = api.delete(f"/api/auth/tokens/{key}/")

    assert response.status_code == 404
    assert response.json() == {"detail": "No such token.", "errors": {}}


@pytest.mark.parametrize("secret", ["\x00", "abc\x00def"])
def test_a_token_with_a_nul_character_is_refused_with_401_not_a_500(api, alice, secret):
    # Postgres text cannot hold NUL: the token_key lookup raised DataError (500).
    api.raise_request_exception = False

    response = api.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {secret}")

    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."


def test_the_token_answer_is_never_stored_by_a_cache(api, alice):
    # It holds the secret (RFC 6749 5.1: "Cache-Control: no-store"); the tokens page does it.
    response = _obtain(api)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"


def test_a_password_change_ends_the_tokens_made_with_the_old_password(api, alice):
    # Django ends the other sessions on a password change (the session auth hash); a token
    # obtained by someone who knew the old password must end too, or changing it locks
    # nobody out.
    stolen = _obtain(api).json()["token"]

    alice.set_password("a-new-long-password")
    alice.save()
    api.credentials(HTTP_AUTHORIZATION=f"Token {stolen}")

    assert api.get("/api/runs/").status_code == 401


def test_a_password_hash_upgrade_at_sign_in_keeps_the_tokens(api, alice, settings):
    secret = _obtain(api).json()["token"]
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",  # preferred now: the login rehashes
        *settings.PASSWORD_HASHERS,
    ]

    assert Client().login(username="alice", password="demo")
    alice.refresh_from_db()
    assert alice.password.startswith("md5$")
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert api.get("/api/runs/").status_code == 200
