"""Signed decision links in approvers' e-mails: a GET shows, a POST from that page decides once,
for the recipient only, while the approval and its action are as the e-mail described."""

from __future__ import annotations

import datetime as dt
import re
from urllib.parse import unquote

import pytest
import time_machine
from django.core import mail
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.links import decision_link_read, decision_link_token_make
from approvals.models import ApprovalRequest, DecisionLink, Notification, RiskTier
from approvals.notifications import notification_deliver, notifications_create
from approvals.notifications_batch import Recipients, notifications_create_many
from audit.models import AuditEvent
from tests.support.approvals import decide, request_approval
from tests.support.people import client_for
from tests.support.throttling import throttle_rates

LINK = re.compile(r"https?://[^\s/]+/links/([^/\s]+)/")
Event = Notification.Event


def delivered_bodies(approval: ApprovalRequest, event: str = Event.REQUEST) -> dict[str, str]:
    """Deliver the approval's e-mails of ``event``; {address: body} as sent."""
    start = len(mail.outbox)
    rows = approval.notifications.filter(event=event, channel=Notification.Channel.EMAIL)
    for row in rows:
        assert notification_deliver(notification_id=row.pk) == "sent"
    return {m.to[0]: m.body for m in mail.outbox[start:]}


def token_for(approval: ApprovalRequest, user) -> str:
    (token,) = LINK.findall(delivered_bodies(approval)[user.email])
    return token


def link_page(token: str) -> str:
    return reverse("approvals:decision-link", kwargs={"token": token})


def link_decide(token: str) -> str:
    return reverse("approvals:decision-link-decide", kwargs={"token": token})


@pytest.fixture
def waiting(demo_policy, alice) -> ApprovalRequest:
    """Alice's refund in tier "write": bob and carol are asked by e-mail."""
    return request_approval(requester=alice, tier="write")


def status_of(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


def test_each_approver_gets_a_link_of_their_own_and_decision_and_expiry_emails_carry_none(
    waiting, alice, bob, carol
):
    bodies = delivered_bodies(waiting)

    assert set(bodies) == {bob.email, carol.email}
    (bob_token,) = LINK.findall(bodies[bob.email])
    (carol_token,) = LINK.findall(bodies[carol.email])
    assert bob_token != carol_token
    assert "Review and approve:" in bodies[bob.email]
    assert decision_link_read(bob_token).recipient == bob
    assert decision_link_read(carol_token).recipient == carol
    # The token is never stored: not in the outbox row, not in the link row.
    assert not Notification.objects.filter(text__contains=bob_token).exists()
    assert bob_token not in str(list(DecisionLink.objects.values()))

    decide(waiting, bob)
    decided = delivered_bodies(waiting, Event.DECISION)
    tier = RiskTier.objects.get(name="write")
    with transaction.atomic():
        notifications_create(approval=waiting, event=Event.EXPIRY, tier=tier)
    expired = delivered_bodies(waiting, Event.EXPIRY)
    assert set(decided) == set(expired) == {alice.email}
    assert "/links/" not in decided[alice.email] + expired[alice.email]


def test_a_link_opened_by_get_decides_nothing_and_its_post_decides_once(waiting, bob):
    token = token_for(waiting, bob)
    client = client_for(bob)

    page = client.get(link_page(token))
    assert page.status_code == 200
    html = page.content.decode()
    assert "A-1" in html and "The customer was charged twice." in html  # the full detail
    assert 'id="link-approve"' in html and 'id="link-reject"' in html
    assert page["Referrer-Policy"] == "same-origin"
    client.head(link_page(token))  # scanners probe with HEAD too
    assert status_of(waiting) == ApprovalRequest.Status.PENDING

    decided = client.post(link_decide(token), {"decision": "approve"})
    assert decided.status_code == 302
    assert decided["Location"] == reverse("approvals:detail", args=[waiting.pk])
    assert status_of(waiting) == ApprovalRequest.Status.APPROVED
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=waiting.pk)
    assert voted.data["via"] == "link"
    link = DecisionLink.objects.get(recipient=bob, approval=waiting)
    assert (link.used_by, link.decision) == (bob, "approve")

    again = client.post(link_decide(token), {"decision": "reject"})
    assert again.status_code == 409
    assert "already used" in again.content.decode()
    assert client.get(link_page(token)).status_code == 409
    assert status_of(waiting) == ApprovalRequest.Status.APPROVED
    assert AuditEvent.objects.filter(action="approval.voted").count() == 1


def test_a_link_rejects_with_the_reason_given(waiting, bob):
    token = token_for(waiting, bob)

    client_for(bob).post(link_decide(token), {"decision": "reject", "message": "Not this one."})

    waiting.refresh_from_db()
    assert waiting.status == ApprovalRequest.Status.REJECTED
    assert waiting.decision["message"] == "Not this one."


def test_a_forwarded_link_decides_nothing_and_shows_nothing_of_the_approval(waiting, bob, carol):
    token = token_for(waiting, bob)
    client = client_for(carol)  # carol may decide it herself, but not with bob's link

    for response in (
        client.get(link_page(token)),
        client.post(link_decide(token), {"decision": "approve"}),
    ):
        assert response.status_code == 403
        html = response.content.decode()
        assert "sent to someone else" in html
        assert "A-1" not in html and "charged twice" not in html
        assert reverse("approvals:detail", args=[waiting.pk]) in html

    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert not DecisionLink.objects.filter(used_at__isnull=False).exists()


def test_a_link_asks_for_sign_in_and_comes_back(waiting, bob):
    token = token_for(waiting, bob)

    response = Client().get(link_page(token))

    assert response.status_code == 302
    assert unquote(response["Location"]) == f"/login/?next={link_page(token)}"
    assert Client().post(link_decide(token), {"decision": "approve"}).status_code == 302
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_an_expired_link_decides_nothing(waiting, bob):
    token = token_for(waiting, bob)
    client = client_for(bob)

    with time_machine.travel(waiting.expires_at + dt.timedelta(seconds=1)):
        assert client.get(link_page(token)).status_code == 410
        refused = client.post(link_decide(token), {"decision": "approve"})

    assert refused.status_code == 410
    assert "expired" in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # the signature
        lambda t: "x" + t[1:],  # the signed value
        lambda t: t.split(":")[0],  # cut short
        lambda t: "not-a-token",
    ],
)
def test_a_tampered_link_decides_nothing(waiting, bob, tamper):
    bad = tamper(token_for(waiting, bob))
    client = client_for(bob)

    assert client.get(link_page(bad)).status_code == 404
    refused = client.post(link_decide(bad), {"decision": "approve"})

    assert refused.status_code == 404
    assert "not valid" in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_a_resent_email_replaces_the_earlier_token(waiting, bob):
    link = DecisionLink.objects.get(recipient=bob, approval=waiting)
    first = decision_link_token_make(link=link)
    second = decision_link_token_make(link=link)

    assert client_for(bob).get(link_page(first)).status_code == 404
    assert client_for(bob).get(link_page(second)).status_code == 200


def test_a_link_for_an_action_that_changed_decides_nothing(waiting, bob):
    token = token_for(waiting, bob)
    # A new quorum round after an edit gives the approval a new payload hash.
    ApprovalRequest.objects.filter(pk=waiting.pk).update(payload_hash="f" * 64)

    refused = client_for(bob).post(link_decide(token), {"decision": "approve"})

    assert refused.status_code == 409
    assert "changed since this e-mail" in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_a_recipient_no_longer_allowed_decides_nothing_and_the_link_stays_usable(
    waiting, bob, demo_policy
):
    token = token_for(waiting, bob)
    client = client_for(bob)
    bob.groups.remove(demo_policy["approvers-write"])

    refused = client.post(link_decide(token), {"decision": "approve"})

    assert refused.status_code == 403
    assert "Only members of approvers-write" in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert DecisionLink.objects.get(recipient=bob, approval=waiting).used_at is None

    bob.groups.add(demo_policy["approvers-write"])  # allowed again: the same link works
    assert client.post(link_decide(token), {"decision": "approve"}).status_code == 302
    assert status_of(waiting) == ApprovalRequest.Status.APPROVED


def test_a_link_decided_elsewhere_meanwhile_decides_nothing(waiting, bob, carol):
    token = token_for(waiting, bob)
    decide(waiting, carol, "reject")

    refused = client_for(bob).post(link_decide(token), {"decision": "approve"})

    assert refused.status_code == 409
    assert "already rejected by carol" in refused.content.decode()
    assert status_of(waiting) == ApprovalRequest.Status.REJECTED
    assert DecisionLink.objects.get(recipient=bob, approval=waiting).used_at is None


def test_a_link_only_approves_or_rejects(waiting, bob):
    token = token_for(waiting, bob)

    refused = client_for(bob).post(link_decide(token), {"decision": "respond", "message": "hi"})

    assert refused.status_code == 400
    assert status_of(waiting) == ApprovalRequest.Status.PENDING
    assert DecisionLink.objects.get(recipient=bob, approval=waiting).used_at is None


def test_link_decisions_share_the_decision_limit(settings, waiting, bob):
    throttle_rates(settings, decide="1/minute")
    token = token_for(waiting, bob)
    client = client_for(bob)
    client.post(link_decide(token), {"decision": "respond"})  # refused (400), counted

    throttled = client.post(link_decide(token), {"decision": "approve"})

    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 60
    assert status_of(waiting) == ApprovalRequest.Status.PENDING


def test_the_sweep_batch_makes_the_same_links_as_one_event_at_a_time(demo_policy, alice, bob):
    approvals = [request_approval(requester=alice, tier="write") for _ in range(2)]
    tier = RiskTier.objects.get(name="write")
    DecisionLink.objects.all().delete()

    def links(make) -> list[tuple]:
        with transaction.atomic():
            rows = make()
            made = sorted(
                (
                    link.approval_id,
                    link.recipient_id,
                    link.notification.recipient,
                    link.payload_hash,
                )
                for link in DecisionLink.objects.filter(notification__in=rows)
            )
            transaction.set_rollback(True)
        return made

    single = links(
        lambda: [
            row
            for a in approvals
            for row in notifications_create(approval=a, event=Event.REMINDER, tier=tier)
        ]
    )
    batch = links(
        lambda: notifications_create_many(
            [(a, Event.REMINDER, tier, "") for a in approvals], recipients=Recipients()
        )
    )
    assert single == batch
    assert len(single) == 4  # bob and carol, for each approval
    assert {r[1] for r in single} == {bob.pk, demo_policy["approvers-critical"].user_set.get().pk}


def test_an_address_shared_by_two_people_gets_no_link(waiting, demo_policy, alice, bob, carol):
    carol.email = bob.email
    carol.save()
    approval = request_approval(requester=alice, tier="write")

    body = delivered_bodies(approval)[bob.email]

    assert "/links/" not in body
    assert f"/approvals/{approval.pk}/" in body
    assert timezone.now() < approval.expires_at
