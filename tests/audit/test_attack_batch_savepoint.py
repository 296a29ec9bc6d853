"""Attack: batch appends around savepoints that roll back, mixed with single appends."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.batch import events_record
from audit.models import AuditEvent
from audit.services import event_record
from audit.verify import chain_verify_db

pytestmark = pytest.mark.django_db


def _ev(n: int) -> list[dict]:
    return [{"action": "x.batched", "actor": "system:t", "data": {"n": i}} for i in range(n)]


class Boom(Exception):
    pass


def test_batches_in_rolled_back_savepoints_leave_a_verifiable_chain():
    event_record(action="run.created", actor="system:t")
    with transaction.atomic():
        event_record(action="a", actor="system:t")
        try:
            with transaction.atomic():
                events_record(_ev(3))  # memo hit from the outer event
                raise Boom
        except Boom:
            pass
        events_record(_ev(2))  # must chain on "a", not on the rolled-back batch
        try:
            with transaction.atomic():
                event_record(action="b", actor="system:t")
                with transaction.atomic():
                    events_record(_ev(2))
                events_record(_ev(1))
                raise Boom
        except Boom:
            pass
        event_record(action="c", actor="system:t")
        with transaction.atomic():
            events_record(_ev(4))
        events_record(_ev(1))
    seqs = list(AuditEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 11))
    result = chain_verify_db()
    assert result.ok, result
