"""Sandbox systems behave like external services with idempotency keys (invariant 9)."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest
from django.db import transaction

from agents.models import SandboxDeploy, SandboxPayment, SandboxTicket
from agents.sandbox import systems as sandbox
from agents.sandbox.systems import SandboxError

TICKET = {"service": "checkout", "title": "checkout 5xx", "severity": "sev2", "body": "errors"}


@pytest.mark.django_db
def test_a_repeated_key_returns_the_first_result_and_creates_nothing():
    first = sandbox.ticket_create(key="k1", **TICKET)
    second = sandbox.ticket_create(key="k1", **TICKET)
    assert second == first
    assert SandboxTicket.objects.count() == 1


@pytest.mark.django_db
def test_a_key_reused_with_other_parameters_is_refused():
    sandbox.ticket_create(key="k1", **TICKET)
    with pytest.raises(SandboxError) as error:
        sandbox.ticket_create(key="k1", **{**TICKET, "severity": "sev1"})
    assert error.value.status == 409
    assert SandboxTicket.objects.count() == 1


@pytest.mark.django_db
def test_writes_need_a_key():
    with pytest.raises(SandboxError):
        sandbox.ticket_create(key=None, **TICKET)


@pytest.mark.django_db
def test_a_write_refuses_to_join_the_callers_transaction():
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        sandbox.ticket_create(key="k1", **TICKET)


@pytest.mark.django_db
def test_refund_and_reversal_are_opposite_money_movements():
    refund = sandbox.payment_refund(key="p1", order_id="A-1", amount="12.50")
    reversal = sandbox.payment_refund_reverse(key="p1:compensate", order_id="A-1", amount="12.50")
    assert refund["amount"] == "-12.50" and reversal["amount"] == "12.50"
    assert sum(SandboxPayment.objects.values_list("amount", flat=True)) == Decimal("0.00")
    assert sandbox.payment_refund(key="p1", order_id="A-1", amount="12.50") == refund


@pytest.mark.django_db
def test_rollback_switches_the_running_version_once():
    sandbox.deploy_record(service="checkout", version="v42", previous_version="v41")
    args = {"service": "checkout", "from_version": "v42", "to_version": "v41"}
    first = sandbox.deploy_switch(key="r1", is_rollback=True, **args)
    again = sandbox.deploy_switch(key="r1", is_rollback=True, **args)
    assert again == first
    assert sandbox.deploy_current(service="checkout").version == "v41"
    assert SandboxDeploy.objects.filter(is_rollback=True).count() == 1


@pytest.mark.django_db
def test_rollback_of_a_version_that_is_not_running_is_refused():
    sandbox.deploy_record(service="checkout", version="v42", previous_version="v41")
    with pytest.raises(SandboxError, match="runs v42"):
        sandbox.deploy_switch(
            key="r1", service="checkout", from_version="v40", to_version="v39", is_rollback=True
        )


@pytest.mark.django_db
def test_discontinued_skus_and_undeliverable_recipients_are_refused():
    with pytest.raises(SandboxError):
        sandbox.inventory_move(key="i1", sku="DISCONTINUED-1", delta=1)
    with pytest.raises(SandboxError):
        sandbox.notification_send(key="n1", channel="email", recipient="x@y.invalid", message="m")


@pytest.mark.django_db(transaction=True)
def test_the_effect_delay_holds_the_answer_after_the_row_is_committed(settings):
    settings.SANDBOX_EFFECT_DELAY_S = 1.0
    results: list[dict] = []

    def call() -> None:
        from django.db import connections

        try:
            results.append(sandbox.ticket_create(key="slow", **TICKET))
        finally:
            connections.close_all()

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while not SandboxTicket.objects.filter(idempotency_key="slow").exists():
        assert time.monotonic() < deadline, "the row never became visible"
        time.sleep(0.02)
    # Committed and visible to another connection while the call has not answered yet.
    assert caller.is_alive() and not results
    caller.join(timeout=5)
    assert results and results[0]["ticket_id"] == SandboxTicket.objects.get().pk
