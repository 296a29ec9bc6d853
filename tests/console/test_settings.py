"""Settings come from the environment; a bad value stops start-up naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _start_django(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in env}
    clean.update(env)
    clean["DJANGO_SETTINGS_MODULE"] = "console.settings"
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://root@localhost/x"),
        ("DATABASE_URL", "not a url"),
        ("Q_BROKER", "rabbit"),
        ("Q_TIMEOUT", "soon"),
        ("RUN_LEASE_SECONDS", "1"),
        ("RUN_HEARTBEAT_SECONDS", "25"),
        ("AGENT_MODEL", "gpt-4o"),
        ("CONSOLE_AGENTS", "[1, 2]"),
        ("SANDBOX_EFFECT_DELAY_S", "-1"),
        ("CHECKPOINT_POOL_SIZE", "many"),
        ("CACHE_URL", "memcached://127.0.0.1:11211"),
        ("API_TOKEN_TTL_HOURS", "0"),
        ("API_THROTTLE_DECIDE", "lots"),
        ("API_THROTTLE_TOKEN_USERNAME", "5/fortnight"),
        ("LOGIN_LOCKOUT_FAILURES", "0"),
        ("TRUSTED_PROXY_COUNT", "-1"),
    ],
)
def test_a_bad_value_names_the_variable(variable, value):
    result = _start_django(**{variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert variable in result.stderr.splitlines()[-1]


def test_retry_must_exceed_timeout():
    result = _start_django(Q_TIMEOUT="60", Q_RETRY="30")
    assert result.returncode != 0
    assert "Q_RETRY" in result.stderr.splitlines()[-1]


def test_secret_key_can_be_required():
    result = _start_django(DJANGO_REQUIRE_SECRET_KEY="true", SECRET_KEY="")
    assert "SECRET_KEY must be set" in result.stderr


def test_good_values_start():
    result = _start_django(DEBUG="true", Q_BROKER="redis", AGENT_MODEL="openai:gpt-4o-mini")
    assert result.returncode == 0, result.stderr


def test_cache_url_selects_redis():
    code = "import django; django.setup(); from django.conf import settings; "
    code += "print(settings.CACHES['default']['BACKEND'], settings.CACHES['default']['LOCATION'])"
    clean = dict(os.environ, CACHE_URL="redis://127.0.0.1:6379/3")
    clean["DJANGO_SETTINGS_MODULE"] = "console.settings"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.split() == [
        "django.core.cache.backends.redis.RedisCache",
        "redis://127.0.0.1:6379/3",
    ]
