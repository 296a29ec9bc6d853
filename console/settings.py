"""Settings for the approval console, read from the environment (see .env.example)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from console.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    proxy_ssl_header,
)
from console.schema_enums import ENUM_NAME_OVERRIDES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CONSOLE_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
# Public, so `manage.py check --deploy` refuses it (console/checks.py).
DEVELOPMENT_SECRET_KEY = "insecure-development-key-set-SECRET_KEY-in-production"
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    # Zero-configuration for `make run` and the tests; a deployment sets SECRET_KEY
    # (README: Configuration), and DJANGO_REQUIRE_SECRET_KEY=true makes that mandatory.
    if env_bool("DJANGO_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("SECRET_KEY must be set (DJANGO_REQUIRE_SECRET_KEY is on)")
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "csp",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "django_q",
    "core",
    "audit",
    "approvals",
    "agents",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.datakey_scope_middleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- HTTPS and browser security headers (README: Setup; docs/security.md) ------------------
# One switch for a deployment served over HTTPS: redirect http, secure cookies, HSTS. Off by
# default because `make run` and the test servers speak plain http on 127.0.0.1; each setting
# below can still be set on its own.
CONSOLE_HTTPS = env_bool("CONSOLE_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", CONSOLE_HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", CONSOLE_HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", CONSOLE_HTTPS)
SECURE_HSTS_SECONDS = env_int(
    "SECURE_HSTS_SECONDS", 365 * 24 * 3600 if CONSOLE_HTTPS else 0, minimum=0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", CONSOLE_HTTPS)
# Preloading is a promise to browser vendors that is slow to undo: opt in explicitly.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Behind a proxy that terminates TLS: the header it sets, e.g. HTTP_X_FORWARDED_PROTO (its
# value must then be "https"), or "HTTP_X_FORWARDED_PROTO,https" to name the value too. Only
# when the proxy always sets (or strips) that header: anyone else could claim https with it.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(env_str("SECURE_PROXY_SSL_HEADER", ""))
SECURE_REFERRER_POLICY = env_str("SECURE_REFERRER_POLICY", "same-origin")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# No inline script anywhere (static/js only); styles from static/css only. Swagger UI's icons
# are data: URIs in its stylesheet. The API docs page loads its setup script from its
# own URL (drf-spectacular's SpectacularSwaggerSplitView), so it needs no exception.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Database ---------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    try:
        # Reused and checked first: a new Postgres connection costs more than a task's queries.
        _db = dj_database_url.parse(
            DATABASE_URL,
            conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0),
            conn_health_checks=True,
        )
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
    if _db.get("ENGINE") not in ("django.db.backends.postgresql", "django.db.backends.sqlite3"):
        raise ImproperlyConfigured("DATABASE_URL must be a postgres:// or sqlite:/// URL")
else:
    _db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR_DIR / "console.sqlite3")}

if _db["ENGINE"] == "django.db.backends.sqlite3":
    _name = Path(_db["NAME"])
    _db["OPTIONS"] = {
        # WAL + a busy timeout + IMMEDIATE transactions let the web server and the worker write
        # at once without "database is locked" errors.
        # secure_delete: deleted rows are overwritten, not left in free pages (erasure).
        "init_command": (
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;"
        ),
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    # Tests use a file (never :memory:) because the durability tests share it with real
    # web server and worker processes.
    _db["TEST"] = {"NAME": str(_name.with_name(f"test_{_name.name}"))}
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth, i18n, static -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

# --- Cache (throttles and the login lock-out share it across processes) ---------------------
# The database cache by default (its table is created by console's migrations); Redis when
# CACHE_URL says redis://. A per-process cache would make every limit per gunicorn worker.
CACHE_URL = env_str("CACHE_URL", "").strip()
if not CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "console.cache.DatabaseCache",  # one statement a write (console/cache.py)
            "LOCATION": "console_cache",
            # Django's default (300) culls a third of the rows in key order once exceeded, and
            # "login-lock:..." sorts first: anyone making 300 rows (a username each) would lift
            # every lock-out. Expired rows are deleted when read or culled.
            "OPTIONS": {"MAX_ENTRIES": env_int("CACHE_MAX_ENTRIES", 1_000_000, minimum=10_000)},
        }
    }
elif CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    }
else:
    raise ImproperlyConfigured(
        f"CACHE_URL must be empty (the database cache) or a redis:// URL, got {CACHE_URL!r}"
    )

# --- API tokens (django-rest-knox: hashed at rest, one per device, they expire) ---------------
KNOX_TOKEN_MODEL = "console.ApiToken"
# knox's own migrations would create its unused (swapped-out) table, whose foreign key to the
# users blocks the TRUNCATE of a flush on Postgres: without migrations, a swapped model gets none.
MIGRATION_MODULES = {"knox": None}
API_TOKEN_TTL_HOURS = env_int("API_TOKEN_TTL_HOURS", 720, minimum=1)
REST_KNOX = {
    "TOKEN_MODEL": KNOX_TOKEN_MODEL,
    "TOKEN_TTL": dt.timedelta(hours=API_TOKEN_TTL_HOURS),
    "AUTH_HEADER_PREFIX": "Token",
}


# --- Throttling (core/throttles.py reads these rates at each request) --------------------------
_RATE_PERIODS = ("s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day")


def _rate(name: str, default: str) -> str:
    raw = env_str(name, default).strip()
    count, _, period = raw.partition("/")
    if not count.isdigit() or int(count) < 1 or period not in _RATE_PERIODS:
        raise ImproperlyConfigured(
            f"{name} must look like '<number>/<second|minute|hour|day>', got {raw!r}"
        )
    return raw


API_THROTTLE_RATES = {
    "user": _rate("API_THROTTLE_USER", "600/minute"),
    "anon": _rate("API_THROTTLE_ANON", "60/minute"),
    "token_ip": _rate("API_THROTTLE_TOKEN_IP", "20/minute"),
    "token_username": _rate("API_THROTTLE_TOKEN_USERNAME", "5/minute"),
    "decide": _rate("API_THROTTLE_DECIDE", "60/minute"),
}
# /login/: this many failed attempts for one username (or from one address) within the window
# lock that username (or address) out for LOGIN_LOCKOUT_SECONDS.
LOGIN_LOCKOUT_FAILURES = env_int("LOGIN_LOCKOUT_FAILURES", 5, minimum=1)
LOGIN_LOCKOUT_WINDOW_SECONDS = env_int("LOGIN_LOCKOUT_WINDOW_SECONDS", 900, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# The audit records the address the limits count (TRUSTED_PROXY_COUNT), not the proxy's.
AUDIT_CLIENT_ADDRESS = "console.lockout.client_ip"

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # The token scheme first: an anonymous request is answered 401 with
    # "WWW-Authenticate: Token" (401, not 403, is what an expired or revoked token gets).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["core.throttles.UserThrottle", "core.throttles.AnonThrottle"],
    # Proxies in front of the app whose X-Forwarded-For is believed; 0 takes REMOTE_ADDR, so a
    # client cannot pick its own address to dodge the per-address limits.
    "NUM_PROXIES": env_int("TRUSTED_PROXY_COUNT", 0, minimum=0),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "console.http.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "console.http.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Approval console API",
    "DESCRIPTION": "Start governed agent runs, decide approvals, read the audit trail.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.schema.api_errors_documented",
    ],
    "ENUM_NAME_OVERRIDES": ENUM_NAME_OVERRIDES,  # console/schema_enums.py
}

# --- Background work (django-q2) -------------------------------------------------------------
Q_BROKER = env_choice("Q_BROKER", "orm", ("orm", "redis"))
Q_TIMEOUT = env_int("Q_TIMEOUT", 45, minimum=1)
Q_RETRY = env_int("Q_RETRY", 60, minimum=2)
if Q_RETRY <= Q_TIMEOUT:
    raise ImproperlyConfigured(f"Q_RETRY ({Q_RETRY}) must exceed Q_TIMEOUT ({Q_TIMEOUT})")
Q_CLUSTER = {
    "name": "console",
    "workers": env_int("Q_WORKERS", 2, minimum=1),
    "timeout": Q_TIMEOUT,
    "retry": Q_RETRY,
    "max_attempts": env_int("Q_MAX_ATTEMPTS", 5, minimum=0),
    "catch_up": False,
    # Seconds between looks at an empty queue: SQLite looks often (a cheap local read); on
    # Postgres NOTIFY wakes the broker and the poll bounds a lost one (core/wakeup.py).
    "poll": env_float("Q_POLL", 0.1 if _db["ENGINE"].endswith("sqlite3") else 0.5, minimum=0.05),
    "save_limit": env_int("Q_SAVE_LIMIT", 1000, minimum=-1),  # .env.example: the cost
    "ack_failures": True,
    "sync": env_bool("Q_SYNC", False),
    "label": "Background tasks",
}
if Q_BROKER == "orm":
    Q_CLUSTER["orm"] = "default"
    # NOTIFY on enqueue, dequeue waits on LISTEN (one held connection per cluster).
    if _db["ENGINE"] == "django.db.backends.postgresql" and env_bool("Q_ORM_LISTEN", True):
        Q_CLUSTER["broker_class"] = "core.wakeup.ListenNotifyORM"
else:
    Q_CLUSTER["redis"] = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

# --- Agents -----------------------------------------------------------------------------------
# Checkpoints deserialize only known types (read by langgraph at import, hence here).
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
# "provider:model" for LangChain's init_chat_model; empty uses the built-in offline model.
AGENT_MODEL = env_str("AGENT_MODEL", "").strip()
if AGENT_MODEL and ":" not in AGENT_MODEL:
    raise ImproperlyConfigured(
        f"AGENT_MODEL must look like 'provider:model' (e.g. openai:gpt-4o-mini), got {AGENT_MODEL!r}"
    )
try:
    CONSOLE_AGENTS: dict[str, str] = json.loads(env_str("CONSOLE_AGENTS", "{}") or "{}")
except json.JSONDecodeError as exc:
    raise ImproperlyConfigured(f"CONSOLE_AGENTS must be a JSON object: {exc}") from exc
if not isinstance(CONSOLE_AGENTS, dict):
    raise ImproperlyConfigured("CONSOLE_AGENTS must be a JSON object of name -> 'module:factory'")
# Where the checkpointer keeps its SQLite file when DATABASE_URL is SQLite (default: next to it).
CHECKPOINT_SQLITE_PATH = env_str("CHECKPOINT_SQLITE_PATH", "")
# Postgres only: connections in each process's checkpointer pool.
CHECKPOINT_POOL_SIZE = env_int("CHECKPOINT_POOL_SIZE", 4, minimum=1)
# Postgres: "fast" (agents/runtime/fast_saver.py) or "postgres"; both fenced by the lease.
CHECKPOINTER = env_choice("CHECKPOINTER", "fast", ("fast", "postgres"))
SANDBOX_EFFECT_DELAY_S = env_float("SANDBOX_EFFECT_DELAY_S", 0.0, minimum=0.0)
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", 30, minimum=2)
RUN_HEARTBEAT_SECONDS = env_float("RUN_HEARTBEAT_SECONDS", 10.0, minimum=0.1)
# A worker trusts its lease only until a quarter of RUN_LEASE_SECONDS before the expiry it last
# wrote (agents/runtime/lease.py): the heartbeat must renew it well before that.
if RUN_HEARTBEAT_SECONDS >= RUN_LEASE_SECONDS * 0.75:
    raise ImproperlyConfigured(
        f"RUN_HEARTBEAT_SECONDS ({RUN_HEARTBEAT_SECONDS}) must be below three quarters of "
        f"RUN_LEASE_SECONDS ({RUN_LEASE_SECONDS})"
    )
# Approvals the sweep reminds, escalates or expires per step and pass (oldest due first).
SWEEP_BATCH = env_int("SWEEP_BATCH", 200, minimum=1)
# Runs recovery re-enqueues per pass (least recently touched first): a pass ends in time.
RECOVERY_BATCH = env_int("RECOVERY_BATCH", 2000, minimum=1)
# Failed advances in a row (no step done in between), including advances that died mid-step (a
# killed or timed-out worker), before a run is dead and escalated to a person.
RUN_MAX_FAILURES = env_int("RUN_MAX_FAILURES", 5, minimum=1)
# One advance (one django-q2 task) stops taking new steps after this long and continues in a
# new task, and a tool call never waits past it: well below the task timeout (Q_TIMEOUT), which
# would kill the task mid-step.
RUN_ADVANCE_DEADLINE_SECONDS = env_float(
    "RUN_ADVANCE_DEADLINE_SECONDS", round(Q_TIMEOUT * 0.6, 1), minimum=0.5
)
if RUN_ADVANCE_DEADLINE_SECONDS >= Q_TIMEOUT:
    raise ImproperlyConfigured(
        f"RUN_ADVANCE_DEADLINE_SECONDS ({RUN_ADVANCE_DEADLINE_SECONDS}) must be below "
        f"Q_TIMEOUT ({Q_TIMEOUT})"
    )
RUN_MAX_STEPS = env_int("RUN_MAX_STEPS", 50, minimum=1)
RUN_MAX_TOKENS = env_int("RUN_MAX_TOKENS", 50_000, minimum=1)
TOOL_TIMEOUT_SECONDS = env_float("TOOL_TIMEOUT_SECONDS", 30.0, minimum=0.1)
TOOL_MAX_RETRIES = env_int("TOOL_MAX_RETRIES", 3, minimum=0)
# A lookup by key that finds nothing proves "it never acted" only once no call under that key
# can still be in flight: this long after the last attempt (a timed-out call may still land).
EFFECT_SETTLE_AFTER_SECONDS = env_int("EFFECT_SETTLE_AFTER_SECONDS", 600, minimum=0)
APPROVAL_TTL_SECONDS = env_int("APPROVAL_TTL_SECONDS", 24 * 3600, minimum=1)
# A reviewer's claim ("bob is looking at this") lapses after this long unless renewed.
APPROVAL_CLAIM_SECONDS = env_int("APPROVAL_CLAIM_SECONDS", 900, minimum=1)
CONSOLE_BASE_URL = env_str("CONSOLE_BASE_URL", "http://127.0.0.1:8000")
# Where the answer to a Slack button press may be POSTed (the payload's response_url): only
# under these prefixes, so a signed request cannot make the console POST anywhere else.
SLACK_RESPONSE_URL_PREFIXES = env_list("SLACK_RESPONSE_URL_PREFIXES", ["https://hooks.slack.com/"])

# --- Metrics (console/metrics/) -------------------------------------------------------------
# Fatigue: reviewers and tools approving more than this share, with a median decision under
# this many seconds, are flagged on /metrics/.
METRICS_FATIGUE_APPROVAL_RATE = env_float("METRICS_FATIGUE_APPROVAL_RATE", 0.98, minimum=0.0)
if METRICS_FATIGUE_APPROVAL_RATE > 1:
    raise ImproperlyConfigured(
        f"METRICS_FATIGUE_APPROVAL_RATE must be a share between 0 and 1, got {METRICS_FATIGUE_APPROVAL_RATE}"
    )
METRICS_FATIGUE_MEDIAN_SECONDS = env_float("METRICS_FATIGUE_MEDIAN_SECONDS", 10.0, minimum=0.0)
# Windows of at most this many requests are exact (rows); larger ones use the rollups.
METRICS_EXACT_MAX_REQUESTS = env_int("METRICS_EXACT_MAX_REQUESTS", 5000, minimum=0)

# Operating it: email, logging, encryption keys, retention, traces, metrics (console/settings_ops.py).
from console.settings_ops import *  # noqa: E402, F403
