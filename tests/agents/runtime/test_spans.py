"""``run.outcome`` of a segment, from what the advance returned (agents/runtime/advance.py and
failures.py spell these outcomes)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode

from agents.runtime.spans import segment_outcome


@pytest.mark.parametrize(
    ("outcome", "kind", "error"),
    [
        ("waiting", "waiting", False),
        ("completed", "completed", False),
        ("failed: BudgetExceeded (run 7c1e)", "failed", True),
        ("dead: WorkerDied (run 7c1e)", "dead", True),
        ("stopped: lease lost", "lease_lost", False),
        ("stopped: run is cancelled", "stopped", False),
        ("cancelled: 2 effect(s) compensated", "cancelled", False),
        ("flagged: pending node(s) a no longer exist in x v2", "flagged", False),
        ("continuing: advance deadline reached", "continuing", False),
        ("retrying in 3.2s: ToolTimeout (run 7c1e)", "retrying", False),
        ("nothing to do: completed", "nothing_to_do", False),
        ("aborted", "aborted", False),
    ],
)
def test_a_segment_names_its_outcome_and_fails_only_for_failed_or_dead(outcome, kind, error):
    span = TracerProvider().get_tracer("test").start_span("run.segment")
    segment_outcome(span, outcome)
    span.end()
    assert span.attributes["run.outcome"] == kind
    assert (span.status.status_code == StatusCode.ERROR) is error
