"""Concurrent writers keep one consistent chain."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from audit.models import AuditEvent
from audit.services import event_record
from audit.verify import chain_verify_db

THREADS = 8
EVENTS_PER_THREAD = 200


@pytest.mark.django_db(transaction=True)
def test_eight_threads_writing_two_hundred_events_each_keep_one_verifiable_chain():
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            start.wait()
            for n in range(EVENTS_PER_THREAD):
                with transaction.atomic():
                    event_record(
                        action="effect.succeeded",
                        actor=f"agent:writer-{index}",
                        data={"writer": index, "n": n},
                    )
        except BaseException as exc:  # reported below, a thread cannot fail the test itself
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    total = THREADS * EVENTS_PER_THREAD
    assert list(AuditEvent.objects.values_list("seq", flat=True)) == list(range(1, total + 1))
    result = chain_verify_db()
    assert (result.ok, result.count, result.last_seq) == (True, total, total)
    writers = {event["data"]["writer"] for event in AuditEvent.objects.values("data")}
    assert writers == set(range(THREADS))
