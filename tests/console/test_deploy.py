"""A deployment passes `check --deploy`; pages carry the CSP and the other security headers."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import proxy_ssl_header

ROOT = Path(__file__).resolve().parents[2]
REAL_KEY = "kq3H7v9Zt2pWm8xR4nB6cY1sD5fG0hJ-aLoUeIiQwEr_TyNmVb"  # 50 characters, as in the brief
# Set by the test run or the developer's shell, they would change what the command checks.
DEPLOY_VARIABLES = (
    "DEBUG",
    "SECRET_KEY",
    "ENCRYPTION_KEYS",
    "ALLOWED_HOSTS",
    "CONSOLE_HTTPS",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_REFERRER_POLICY",
    # Set by the browser tests of this process (Playwright runs a loop in its thread); never in
    # a deployment, and check --deploy says so (async.E001).
    "DJANGO_ALLOW_ASYNC_UNSAFE",
)
DEPLOYMENT = {
    "DEBUG": "false",
    "SECRET_KEY": REAL_KEY,
    "ENCRYPTION_KEYS": "k1:" + base64.b64encode(bytes(range(32))).decode(),
    "ALLOWED_HOSTS": "console.example.com",
    "CONSOLE_HTTPS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
}


def check_deploy(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in DEPLOY_VARIABLES}
    clean.update(env, DJANGO_SETTINGS_MODULE="console.settings")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_for_an_https_deployment_with_a_real_key():
    result = check_deploy(**DEPLOYMENT)

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_check_deploy_fails_loudly_while_the_development_key_is_in_use():
    result = check_deploy(**{**DEPLOYMENT, "SECRET_KEY": ""})

    assert result.returncode != 0
    assert "console.E001" in result.stderr
    assert "SECRET_KEY is the built-in development key" in result.stderr


def test_the_plain_http_defaults_keep_make_run_working_but_are_not_a_deployment():
    result = check_deploy(
        DEBUG="false", SECRET_KEY=REAL_KEY, ENCRYPTION_KEYS=DEPLOYMENT["ENCRYPTION_KEYS"]
    )

    assert result.returncode == 0  # warnings only: `make run` serves http on 127.0.0.1
    for warning in (
        "security.W004",
        "security.W008",
        "security.W012",
        "security.W016",
    ):
        assert warning in result.stderr


def test_a_master_key_derived_from_the_secret_key_fails_the_deploy_check_and_a_bad_ring_stops_start_up():
    # Personal data is sealed under run keys wrapped by the master key: a master key derived
    # from SECRET_KEY would turn a rotation of SECRET_KEY into the erasure of every run.
    derived = check_deploy(**{**DEPLOYMENT, "ENCRYPTION_KEYS": ""})
    assert derived.returncode != 0
    assert "console.E002" in derived.stderr
    assert "erase" in derived.stderr

    bad = check_deploy(**{**DEPLOYMENT, "ENCRYPTION_KEYS": "k1:short"})
    assert bad.returncode != 0
    assert "ENCRYPTION_KEYS" in bad.stderr


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", None),
        ("HTTP_X_FORWARDED_PROTO", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("HTTP_X_FORWARDED_SSL, on", ("HTTP_X_FORWARDED_SSL", "on")),
    ],
)
def test_the_proxy_ssl_header_is_read_from_one_variable(raw, expected):
    assert proxy_ssl_header(raw) == expected


@pytest.mark.parametrize("raw", ["X-Forwarded-Proto", "HTTP_X FORWARDED", "https"])
def test_a_proxy_ssl_header_that_django_would_never_see_names_the_variable(raw):
    with pytest.raises(ImproperlyConfigured, match="SECURE_PROXY_SSL_HEADER"):
        proxy_ssl_header(raw)


# Two requests to /login/ in a process configured as DEPLOYMENT: plain, and through the proxy.
THROUGH_THE_PROXY = """
import json, django
django.setup()
from django.test import Client
plain = Client().get("/login/", headers={"host": "console.example.com"})
proxied = Client().get(
    "/login/", headers={"host": "console.example.com", "x-forwarded-proto": "https"}
)
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location")],
    "proxied": [proxied.status_code, proxied.get("Strict-Transport-Security")],
    "cookies": {name: bool(c["secure"]) for name, c in proxied.cookies.items()},
}))
"""


def test_behind_a_tls_proxy_https_is_served_with_hsts_and_plain_http_is_redirected():
    clean = {k: v for k, v in os.environ.items() if k not in DEPLOY_VARIABLES}
    clean.update(DEPLOYMENT, DJANGO_SETTINGS_MODULE="console.settings")
    result = subprocess.run(
        [sys.executable, "-c", THROUGH_THE_PROXY],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.splitlines()[-1])
    assert answers["plain"] == [301, "https://console.example.com/login/"]
    assert answers["proxied"] == [200, "max-age=31536000; includeSubDomains; preload"]
    assert answers["cookies"] == {"csrftoken": True}


def test_a_page_carries_a_content_security_policy_without_inline_script_and_the_other_headers(
    client, db
):
    response = client.get("/login/")

    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["form-action"] == "'self'"
    assert policy["base-uri"] == "'self'"
    assert "unsafe" not in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"


INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:", re.IGNORECASE
)


def test_no_template_holds_inline_script_style_or_event_handlers():
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in sorted((ROOT / "templates").rglob("*.html"))
        for match in INLINE.finditer(path.read_text())
    ]

    assert offenders == []
