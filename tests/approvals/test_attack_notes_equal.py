"""Attack: the batch outbox rows must equal notifications_create's, for every sweep event."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from approvals.models import Notification, RiskTier, WebhookEndpoint
from approvals.notifications import notifications_create
from approvals.notifications_batch import Recipients, notifications_create_many
from tests.support.approvals import request_approval

pytestmark = pytest.mark.usefixtures("queued")
Event = Notification.Event


class Undo(Exception):
    pass


def _rows(made) -> list[tuple]:
    return sorted(
        (r.event, r.channel, r.recipient, r.subject, r.text, repr(sorted(r.payload.items())))
        for r in made
    )


@pytest.mark.parametrize(
    "event", [Event.REMINDER, Event.ESCALATION, Event.EXPIRY, Event.REQUEST, Event.DECISION]
)
def test_batch_rows_equal_single_rows(demo_policy, alice, bob, carol, dave, event):
    tier = RiskTier.objects.get(name="write")
    tier.webhook_endpoint = WebhookEndpoint.objects.create(name="h", url="http://127.0.0.1:9/h")
    tier.save()
    crit = Group.objects.get(name="approvers-critical")
    # the requester is in the approver and escalation groups; an inactive member; a duplicate email
    alice.groups.add(Group.objects.get(name="approvers-write"), crit)
    dave.groups.add(crit)
    dave.email = bob.email
    dave.save()
    approvals = [request_approval(requester=r, tier="write") for r in (alice, bob, alice)]
    approvals[1].escalated_at = timezone.now() - dt.timedelta(seconds=5)
    tier = RiskTier.objects.get(name="write")
    single, batch = [], []
    for store, make in (
        (
            single,
            lambda: [
                r
                for a in approvals
                for r in notifications_create(approval=a, event=event, tier=tier, detail="d")
            ],
        ),
        (
            batch,
            lambda: notifications_create_many(
                [(a, event, tier, "d") for a in approvals], recipients=Recipients()
            ),
        ),
    ):
        try:
            with transaction.atomic():
                store.extend(make())
                raise Undo
        except Undo:
            pass
    assert _rows(batch) == _rows(single)
