"""Who may call the API: tokens, sessions (with CSRF on writes), anonymous visitors."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs


def test_token_endpoint_returns_a_token_that_authenticates_requests(api, alice):
    response = api.post(
        "/api/auth/token/", {"username": "alice", "password": "demo"}, format="json"
    )

    assert response.status_code == 200
    token = response.json()["token"]
    assert token == Token.objects.get(user=alice).key
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/runs/").status_code == 200


def test_asking_twice_returns_the_same_token(api, alice):
    body = {"username": "alice", "password": "demo"}
    first = api.post("/api/auth/token/", body, format="json").json()["token"]
    second = api.post("/api/auth/token/", body, format="json").json()["token"]

    assert first == second


def test_token_endpoint_refuses_a_wrong_password_with_400(api, alice):
    response = api.post(
        "/api/auth/token/", {"username": "alice", "password": "nope"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {"non_field_errors": "wrong username or password"}
    assert not Token.objects.filter(user=alice).exists()


def test_token_endpoint_names_a_missing_password(api, alice):
    response = api.post("/api/auth/token/", {"username": "alice"}, format="json")

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"password"}


def test_an_unknown_token_is_refused(api, alice):
    api.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")

    response = api.get("/api/runs/")

    assert response.status_code in (401, 403)
    assert response.json()["detail"] == "Invalid token."


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
