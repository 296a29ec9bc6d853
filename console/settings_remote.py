"""Settings of the remote approval service (agents/remote/): star-imported from
console/settings_ops.py; each read from the environment with the strict helpers."""

from __future__ import annotations

from console.env import env_int

# GET /api/approval-requests/{id}/?wait=N waits at most this long (N above it: 400).
REMOTE_LONG_POLL_MAX_SECONDS = env_int("REMOTE_LONG_POLL_MAX_SECONDS", 30, minimum=0)
# Long polls one web process holds at once (each holds a thread while it waits); beyond it a
# poll answers at once with Retry-After. Keep it well under the threads per process (serve:
# 4), so agents never take the threads people need. 0: no long polls (always at once).
REMOTE_LONG_POLL_CONCURRENCY = env_int("REMOTE_LONG_POLL_CONCURRENCY", 1, minimum=0)
# An external agent's approved (or edited) action with no outcome reported this long after the
# decision is stuck ("outcome_not_reported": escalated once by the stuck sweep).
REMOTE_OUTCOME_DEADLINE_SECONDS = env_int("REMOTE_OUTCOME_DEADLINE_SECONDS", 3600, minimum=60)
