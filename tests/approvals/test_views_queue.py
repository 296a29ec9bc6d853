"""The queue page: what each person sees, filters, ordering, live partial, keyset pages."""

from __future__ import annotations

import datetime as dt
import re

from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.pagination import PAGE_SIZE
from tests.support.pages import PageApprovalFactory, PageRunFactory
from tests.support.people import client_for

QUEUE = reverse("approvals:queue")


def _detail(approval) -> str:
    return reverse("approvals:detail", args=[approval.pk])


def test_queue_needs_a_login(client, db):
    response = client.get(QUEUE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_bob_sees_the_approval_of_alices_run(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.get(QUEUE)
    html = response.content.decode()
    assert response.status_code == 200
    assert _detail(approval) in html
    assert "refund_payment" in html
    assert "Refunds 120 USD on order A-1001" in html  # the one-line summary
    assert 'class="badge tier-write">write<' in html
    assert "alice" in html
    assert f'data-expires="{approval.expires_at.isoformat()}"' in html  # the countdown


def test_dave_who_may_decide_nothing_sees_nothing(dave, approval):
    as_dave = client_for(dave)
    html = as_dave.get(QUEUE).content.decode()
    assert _detail(approval) not in html
    assert "You may not decide approvals" in html


def test_dave_cannot_widen_the_queue_to_all(dave, approval):
    as_dave = client_for(dave)
    html = as_dave.get(QUEUE, {"scope": "all"}).content.decode()
    assert _detail(approval) not in html


def test_alice_does_not_see_the_approval_of_her_own_run(alice):
    # Even holding the right to decide, nobody decides their own run (four eyes).
    alice.user_permissions.add(
        Permission.objects.get(codename="decide", content_type__app_label="approvals")
    )
    own = PageApprovalFactory(run=PageRunFactory(requested_by=alice))
    html = client_for(alice).get(QUEUE).content.decode()
    assert _detail(own) not in html


def test_all_pending_shows_approvals_a_reviewer_may_not_decide(bob):
    as_bob = client_for(bob)
    own = PageApprovalFactory(run=PageRunFactory(requested_by=bob))
    assert _detail(own) not in as_bob.get(QUEUE).content.decode()
    assert _detail(own) in as_bob.get(QUEUE, {"scope": "all"}).content.decode()


def test_soonest_expiry_comes_first(bob, run_of_alice):
    as_bob = client_for(bob)
    later = PageApprovalFactory(run=run_of_alice, expires_in=dt.timedelta(hours=5))
    sooner = PageApprovalFactory(run=run_of_alice, expires_in=dt.timedelta(minutes=5))
    html = as_bob.get(QUEUE).content.decode()
    assert html.index(_detail(sooner)) < html.index(_detail(later))


def test_expired_and_decided_approvals_are_not_in_the_queue(bob, run_of_alice):
    as_bob = client_for(bob)
    expired = PageApprovalFactory(run=run_of_alice, expires_in=dt.timedelta(minutes=-1))
    decided = PageApprovalFactory(run=run_of_alice, status="approved")
    html = as_bob.get(QUEUE).content.decode()
    assert _detail(expired) not in html
    assert _detail(decided) not in html


def test_filters_by_tier_tool_agent_and_text(bob, alice):
    as_bob = client_for(bob)
    refund = PageApprovalFactory(run=PageRunFactory(requested_by=alice, agent="refund_agent"))
    rollback = PageApprovalFactory(
        run=PageRunFactory(requested_by=alice, agent="incident_copilot"),
        tool="deploy_rollback",
        tier="critical",
        args={"service": "checkout"},
    )
    cases = [
        ({"tier": "critical"}, rollback, refund),
        ({"tier": "write"}, refund, rollback),
        ({"tool": "deploy_rollback"}, rollback, refund),
        ({"agent": "refund_agent"}, refund, rollback),
        ({"q": "rollb"}, rollback, refund),
    ]
    for params, shown, hidden in cases:
        html = as_bob.get(QUEUE, params).content.decode()
        assert _detail(shown) in html, params
        assert _detail(hidden) not in html, params


def test_an_htmx_request_gets_only_the_table_and_keeps_the_filters(bob, approval):
    as_bob = client_for(bob)
    response = as_bob.get(QUEUE, {"tier": "write"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="queue-table"' in html
    # The partial polls its own URL, filters included.
    assert re.search(r'hx-get="/\?tier=write"[^>]*hx-trigger="every 15s"', html)
    assert "HX-Request" in response["Vary"]


def test_keyset_pages_without_counting(bob, run_of_alice):
    as_bob = client_for(bob)
    approvals = [
        PageApprovalFactory(run=run_of_alice, expires_in=dt.timedelta(minutes=10 + i))
        for i in range(PAGE_SIZE + 5)
    ]
    with CaptureQueriesContext(connection) as queries:
        first = as_bob.get(QUEUE).content.decode()
    assert not [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert all(_detail(a) in first for a in approvals[:PAGE_SIZE])
    assert _detail(approvals[PAGE_SIZE]) not in first
    cursor = re.search(r'href="/\?cursor=([^"&]+)" rel="next"', first).group(1)

    with CaptureQueriesContext(connection) as queries:
        second = as_bob.get(QUEUE, {"cursor": cursor}).content.decode()
    assert not [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert all(_detail(a) in second for a in approvals[PAGE_SIZE:])
    assert _detail(approvals[0]) not in second
    assert 'rel="next"' not in second
    assert "First page" in second


def test_keyset_pages_do_not_skip_rows_that_expire_at_the_same_moment(bob, run_of_alice):
    as_bob = client_for(bob)
    same = [PageApprovalFactory(run=run_of_alice) for _ in range(PAGE_SIZE + 2)]
    moment = same[0].expires_at
    type(same[0]).objects.filter(pk__in=[a.pk for a in same]).update(expires_at=moment)
    first = as_bob.get(QUEUE).content.decode()
    cursor = re.search(r'href="/\?cursor=([^"&]+)" rel="next"', first).group(1)
    second = as_bob.get(QUEUE, {"cursor": cursor}).content.decode()
    for a in same:
        assert (_detail(a) in first) != (_detail(a) in second)


def test_a_forged_cursor_shows_the_first_page(bob, approval):
    as_bob = client_for(bob)
    for cursor in (
        "not-a-cursor",
        "WyJ4IiwgIjEiXQ",
        "WyIyMDI0LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgIngiXQ",
    ):
        response = as_bob.get(QUEUE, {"cursor": cursor})
        assert response.status_code == 200
        assert _detail(approval) in response.content.decode()
