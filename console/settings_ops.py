"""Settings for operating the console: email, logging, encryption at rest, retention, traces.

Star-imported at the end of console/settings.py (which stays readable in one sitting); every
value is read from the environment with the strict helpers of console/env.py.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool, env_choice, env_int, env_list, env_str
from core.keyring import keyring_parse

# The master key ring (core/keyring.py): id:base64key,... the first one encrypts. Unset: derived
# from SECRET_KEY, which `check --deploy` refuses (console.E002). Parsed now so a bad value stops
# start-up naming the variable.
ENCRYPTION_KEYS = env_str("ENCRYPTION_KEYS", "")
keyring_parse(ENCRYPTION_KEYS, secret_key="")  # checks the text; the ring is made on first use

# --- Static files ---------------------------------------------------------------------------
# Where collectstatic writes and whitenoise reads. Unset: CONSOLE_VAR_DIR/staticfiles (settings.py).
# The container image sets it outside its var/ volume, so each new image serves its own files
# instead of those a volume kept from the image it was first filled by.
if env_str("CONSOLE_STATIC_ROOT", ""):
    STATIC_ROOT = Path(env_str("CONSOLE_STATIC_ROOT"))
    if not STATIC_ROOT.is_absolute():
        raise ImproperlyConfigured(
            f"CONSOLE_STATIC_ROOT must be an absolute path, got {str(STATIC_ROOT)!r}"
        )

# --- Checkpoint retention (agents/runtime/retention.py; docs/operations.md) ---------------
# Defaults for agents without a policy in the admin: a finished run keeps its full checkpoint
# history this many days (0: forever), then is pruned to its final checkpoint ("final") or has
# its thread deleted ("delete"). The audit trail keeps the run's summary either way.
CHECKPOINT_RETENTION_DAYS = env_int("CHECKPOINT_RETENTION_DAYS", 30, minimum=0)
CHECKPOINT_RETENTION_ACTION = env_choice(
    "CHECKPOINT_RETENTION_ACTION", "final", ("final", "delete")
)
# Runs one prune pass (every minute, and `manage.py checkpoints_prune`) takes at most.
CHECKPOINT_PRUNE_BATCH = env_int("CHECKPOINT_PRUNE_BATCH", 200, minimum=1)

# --- Email and logging --------------------------------------------------------------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
# The directory Django's file backend (django.core.mail.backends.filebased.EmailBackend) writes
# each e-mail to: for development and the browser tests, which read the links people get.
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", "") or None
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "console@localhost")

# LOG_FORMAT=json: one JSON object a line (python-json-logger), with the run and thread ids of
# the advance that wrote it (core/logcontext.py); plain: human-readable lines.
LOG_FORMAT = env_choice("LOG_FORMAT", "plain", ("plain", "json"))
# Root log level, in either case (logging itself accepts only upper case).
LOG_LEVEL = env_choice(
    "LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")
).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_context": {"()": "core.logcontext.RunContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(run_id)s %(thread_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["run_context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"httpx": {"level": "WARNING"}},
}

# --- Traces (console/tracing.py, docs/operations.md "Observability: traces") ---------------
# Set: spans are exported over OTLP/HTTP to this base URL (the exporter adds /v1/traces; the
# SDK reads the other standard OTEL_* variables itself). Unset: no provider, no exporter.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
if OTEL_EXPORTER_OTLP_ENDPOINT and not OTEL_EXPORTER_OTLP_ENDPOINT.startswith(
    ("http://", "https://")
):
    raise ImproperlyConfigured(
        "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, "
        f"got {OTEL_EXPORTER_OTLP_ENDPOINT!r}"
    )
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "").strip() or "approval-console"
OTEL_SDK_DISABLED = env_bool("OTEL_SDK_DISABLED", False)

# --- Prometheus /metrics, /healthz, /readyz (console/prometheus.py, console/health.py) ----------
# A bearer token that opens /metrics from anywhere ("Authorization: Bearer <token>"); without
# it, only clients in METRICS_ALLOWED_NETWORKS are answered (their address as the API limits
# see it: TRUSTED_PROXY_COUNT).
METRICS_TOKEN = env_str("METRICS_TOKEN", "")


def _networks(
    name: str, default: list[str]
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in env_list(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must list networks like 10.0.0.0/8: {exc}") from exc


METRICS_ALLOWED_NETWORKS = _networks("METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
# Probes speak plain http inside the network: never redirected to https.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# prometheus_client reads PROMETHEUS_MULTIPROC_DIR itself, at import; `manage.py serve` sets it
# (under CONSOLE_VAR_DIR) for its children. Made here so a process never fails writing there.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR:
    os.makedirs(PROMETHEUS_MULTIPROC_DIR, exist_ok=True)
# /readyz fails when no worker ran the every-minute heartbeat task for this long.
WORKER_HEARTBEAT_MAX_AGE_SECONDS = env_int("WORKER_HEARTBEAT_MAX_AGE_SECONDS", 180, minimum=61)
# A run still "running" this long after its lease's expiry (nobody took it over: recovery
# re-enqueues lapsed leases every minute) or a waiting run with no pending approval this long
# is stuck: escalated once (approvals/services/stuck.py).
STUCK_RUN_GRACE_SECONDS = env_int("STUCK_RUN_GRACE_SECONDS", 300, minimum=60)

# The remote approval service: long poll, outcome deadline (console/settings_remote.py).
# Graduated autonomy's advice thresholds (console/settings_autonomy.py).
from console.settings_autonomy import *  # noqa: E402, F403

# Canaries: the catch rate below which a reviewer is flagged (console/settings_canary.py).
from console.settings_canary import *  # noqa: E402, F403
from console.settings_remote import *  # noqa: E402, F403
