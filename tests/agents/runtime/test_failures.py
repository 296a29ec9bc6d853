"""Failures of an advance: classification by the exception hierarchy, one-off retry schedules."""

from __future__ import annotations

import datetime as dt

import pytest
from django_q.models import Schedule
from django_q.scheduler import scheduler

from agents.effects.errors import RetryableToolError, ToolError, ToolTimeout
from agents.runtime import failures


def test_a_retry_schedule_is_deleted_once_it_has_run(
    transactional_db, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        failures._enqueue_later("00000000-0000-0000-0000-000000000001", 0.0)
    retries = Schedule.objects.filter(name__startswith="retry-")
    (row,) = retries
    retries.update(next_run=row.next_run - dt.timedelta(seconds=5))
    scheduler()
    assert not retries.exists()


class PaymentProviderTimeout(ToolTimeout):
    """A provider's own timeout, named like nothing the classifier knows."""


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (ToolTimeout("no answer"), True),
        (PaymentProviderTimeout("no answer"), True),
        (RetryableToolError("503"), True),
        (ToolError("400"), False),
        (ToolError("429", status=429), True),
        (TimeoutError(), True),
        (ValueError("bad"), False),
    ],
)
def test_retry_classification_follows_the_exception_hierarchy(exc, retryable):
    assert failures.is_retryable(exc) is retryable
