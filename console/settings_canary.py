"""Settings of canaries (docs/autonomy.md): star-imported from console/settings_ops.py;
each read from the environment with the strict helpers."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from console.env import env_float, env_int

# A reviewer whose canary catch rate (caught / (caught + missed)) in the metrics window is below
# this, with at least AUTONOMY_CANARY_MIN_SEEN canaries decided, is flagged for fatigue.
AUTONOMY_CANARY_FATIGUE_CATCH_RATE = env_float(
    "AUTONOMY_CANARY_FATIGUE_CATCH_RATE", 0.8, minimum=0.0
)
if AUTONOMY_CANARY_FATIGUE_CATCH_RATE > 1:
    raise ImproperlyConfigured(
        f"AUTONOMY_CANARY_FATIGUE_CATCH_RATE must be <= 1, got {AUTONOMY_CANARY_FATIGUE_CATCH_RATE}"
    )
AUTONOMY_CANARY_MIN_SEEN = env_int("AUTONOMY_CANARY_MIN_SEEN", 3, minimum=1)
