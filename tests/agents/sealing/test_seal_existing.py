"""``manage.py seal_existing``: values an older version wrote in plaintext get sealed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, models, transaction

from agents.models import Effect
from approvals.models import AgentRun, ApprovalRequest, ApprovalVote
from audit.models import AuditEvent
from core.sealed_fields import SealedJSONField, SealedTextField
from tests.support.factories import ApprovalFactory, EffectFactory

pytestmark = pytest.mark.django_db

SECRETS = ("legacy@example.com", "LEGACY-ORDER-77", "LEGACY-IBAN-99", "legacy boom", "LEGACY-NOTE")
COLUMNS = {
    AgentRun: ("input", "output", "error"),
    ApprovalRequest: ("args", "payload", "decision"),
    ApprovalVote: ("args", "message"),
    Effect: ("args", "result", "error"),
}


@contextlib.contextmanager
def written_by_an_older_version() -> Iterator[None]:
    """The fields as they were before sealing: plain JSON and text columns."""
    with contextlib.ExitStack() as stack:
        for sealed, plain in (
            (SealedJSONField, models.JSONField),
            (SealedTextField, models.TextField),
        ):
            for name in ("pre_save", "get_prep_value"):
                stack.enter_context(_patched(sealed, name, getattr(plain, name)))
        yield


@contextlib.contextmanager
def _patched(cls: type, name: str, value: object) -> Iterator[None]:
    old = cls.__dict__[name]
    setattr(cls, name, value)
    try:
        yield
    finally:
        setattr(cls, name, old)


def stored_text() -> str:
    """Every sealed column of every row, as the database stores it."""
    parts = []
    with connection.cursor() as cursor:
        for model, columns in COLUMNS.items():
            cast = ", ".join(
                f"CAST({c} AS TEXT)" if connection.vendor == "postgresql" else c for c in columns
            )
            cursor.execute(f"SELECT {cast} FROM {model._meta.db_table}")  # noqa: S608
            parts.extend(str(v) for row in cursor.fetchall() for v in row)
    return "\n".join(parts)


def _legacy_rows(bob) -> tuple[ApprovalRequest, Effect]:
    with written_by_an_older_version():
        approval = ApprovalFactory(
            args={"order_id": "LEGACY-ORDER-77", "amount": 5},
            decision={"decision": "approve", "message": "LEGACY-NOTE"},
            run__input={"customer_email": "legacy@example.com"},
            run__error="legacy boom",
        )
        ApprovalVote.objects.create(
            approval=approval,
            user=bob,
            decision="approve",
            args={"order_id": "LEGACY-ORDER-77"},
            args_hash="0" * 64,
            message="LEGACY-NOTE",
        )
        effect = EffectFactory(run=approval.run, args={"iban": "LEGACY-IBAN-99"})
    return approval, effect


def test_seal_existing_seals_every_legacy_value_and_puts_the_ledger_trigger_back(bob) -> None:
    approval, effect = _legacy_rows(bob)
    fingerprint = effect.args_fingerprint
    before = stored_text()
    assert all(secret in before for secret in SECRETS)  # the control: the scan sees plaintext

    out = StringIO()
    call_command("seal_existing", "--dry-run", stdout=out)
    assert "approvals.AgentRun: done, 3 values in plaintext" in out.getvalue()
    assert stored_text() == before  # a dry run changes nothing

    call_command("seal_existing", "--batch", "1", stdout=StringIO())
    after = stored_text()
    assert not [secret for secret in SECRETS if secret in after]
    approval.refresh_from_db()
    effect.refresh_from_db()
    assert approval.args == {"order_id": "LEGACY-ORDER-77", "amount": 5}
    assert approval.run.input == {"customer_email": "legacy@example.com"}
    assert AgentRun.objects.get(pk=approval.run_id).error == "legacy boom"
    assert effect.args == {"iban": "LEGACY-IBAN-99"}
    assert effect.args_fingerprint == fingerprint  # retries of the same call still match
    assert ApprovalVote.objects.get(approval=approval).message == "LEGACY-NOTE"
    event = AuditEvent.objects.get(action="data.sealed")
    assert event.data["values"]["agents.Effect"] == 2  # args and the empty result

    # The ledger's identity is append-only again.
    with pytest.raises(DatabaseError), transaction.atomic():
        Effect.objects.filter(pk=effect.pk).update(tool="another_tool")

    again = StringIO()
    call_command("seal_existing", stdout=again)
    assert "Sealed: 0 values." in again.getvalue()
    assert AuditEvent.objects.filter(action="data.sealed").count() == 1


def test_seal_existing_refuses_a_bad_batch() -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--batch"):
        call_command("seal_existing", "--batch", "0")


def test_erasing_a_run_written_before_sealing_leaves_none_of_its_values(bob, frank) -> None:
    from agents.erasure import runs_erase
    from audit.services import event_record

    approval, _ = _legacy_rows(bob)
    AgentRun.objects.filter(pk=approval.run_id).update(status=AgentRun.Status.COMPLETED)
    ApprovalRequest.objects.filter(pk=approval.pk).update(status="approved")
    Effect.objects.filter(run_id=approval.run_id).update(status="succeeded")
    # An audit event of that time: append-only and hashed, so it keeps its plaintext.
    event_record(
        action="run.created", actor=bob, run_id=approval.run_id, data={"input": {"x": "OLD"}}
    )

    runs_erase(runs=[approval.run_id], user=frank, reason="request 9")

    assert not [secret for secret in SECRETS if secret in stored_text()]
    performed = AuditEvent.objects.get(action="erasure.performed")
    assert performed.data["legacy_values"] == 10  # sealed, then erased with the key
    assert performed.data["legacy_events"] == 1  # said, not hidden
