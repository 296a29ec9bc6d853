"""Settings of graduated autonomy's advice (approvals/advice.py, docs/autonomy.md): the
thresholds that make the advice say promote or demote. Star-imported from
console/settings_ops.py; each read from the environment with the strict helpers."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from console.env import env_float, env_int


def _rate(name: str, default: float) -> float:
    """A share in [0, 1]; anything else is refused at start-up, naming the variable."""
    value = env_float(name, default, minimum=0)
    if value > 1:
        raise ImproperlyConfigured(f"{name} must be <= 1 (a share, 0..1), got {value}")
    return value


# Promote (ask/shadow -> sampled) when the approve rate is at least this, over at least
# AUTONOMY_PROMOTE_MIN_VOLUME decisions by a person, with no "unsafe" rejection.
AUTONOMY_PROMOTE_APPROVE_RATE = _rate("AUTONOMY_PROMOTE_APPROVE_RATE", 0.95)
AUTONOMY_PROMOTE_MIN_VOLUME = env_int("AUTONOMY_PROMOTE_MIN_VOLUME", 50, minimum=1)
# Demote (sampled/post_hoc -> ask) when the reject rate, or the share of reviewed autonomous
# actions that were undone, is at least this.
AUTONOMY_DEMOTE_REJECT_RATE = _rate("AUTONOMY_DEMOTE_REJECT_RATE", 0.20)
AUTONOMY_DEMOTE_UNDO_RATE = _rate("AUTONOMY_DEMOTE_UNDO_RATE", 0.05)
# The advice's default window (days, 1..365; ?days= overrides it per request).
AUTONOMY_ADVICE_WINDOW_DAYS = env_int("AUTONOMY_ADVICE_WINDOW_DAYS", 30, minimum=1)
if AUTONOMY_ADVICE_WINDOW_DAYS > 365:
    raise ImproperlyConfigured(
        f"AUTONOMY_ADVICE_WINDOW_DAYS must be <= 365, got {AUTONOMY_ADVICE_WINDOW_DAYS}"
    )
