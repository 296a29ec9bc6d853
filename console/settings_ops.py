"""Settings for operating the console: email, logging, encryption at rest, retention, traces.

Star-imported at the end of console/settings.py (which stays readable in one sitting); every
value is read from the environment with the strict helpers of console/env.py.
"""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool, env_choice, env_int, env_str
from core.keyring import keyring_parse

# The master key ring (core/keyring.py): id:base64key,... the first one encrypts. Unset: derived
# from SECRET_KEY, which `check --deploy` warns of (console.W002). Parsed now so a bad value stops
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
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "console@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
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
