from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.utils import timezone

from agents.models import SandboxDeploy

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def groups_of(username: str) -> set[str]:
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def test_every_demo_person_logs_in_with_password_demo_and_is_printed():
    output = seed()
    for username in ("alice", "bob", "carol", "dave", "erin", "frank", "admin"):
        assert authenticate(username=username, password="demo") is not None, username
        assert username in output


def test_only_bob_and_carol_may_decide_and_admin_is_a_superuser_in_no_group():
    seed()
    may_decide = {u.username for u in User.objects.all() if u.has_perm("approvals.decide")}
    assert may_decide == {"bob", "carol", "admin"}  # admin as superuser holds every permission
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff
    assert not User.objects.get(username="carol").is_superuser
    assert groups_of("admin") == set()


def test_approver_groups_hold_bob_and_carol_and_compliance_exists():
    seed()
    assert groups_of("bob") == {"approvers-write"}
    assert groups_of("carol") == {"approvers-write", "approvers-critical"}
    assert groups_of("alice") == groups_of("dave") == set()
    assert Group.objects.filter(name="compliance").exists()


def test_frank_is_the_demo_compliance_officer_who_reads_the_audit_trail():
    seed()
    frank = User.objects.get(username="frank")
    assert groups_of("frank") == {"compliance"}
    assert frank.has_perm("audit.view_audit") and not frank.has_perm("approvals.decide")


def test_checkout_was_deployed_within_the_last_hour_and_other_services_earlier():
    seed()
    now = timezone.now()
    checkout = SandboxDeploy.objects.filter(service="checkout").order_by("-deployed_at").first()
    assert now - dt.timedelta(hours=1) < checkout.deployed_at <= now
    older = SandboxDeploy.objects.exclude(service="checkout")
    assert older.count() >= 2
    assert all(d.deployed_at < now - dt.timedelta(hours=1) for d in older)


def test_seeding_twice_converges_and_resets_changed_passwords():
    seed()
    bob = User.objects.get(username="bob")
    bob.set_password("something-else")
    bob.save()
    bob.groups.clear()
    counts = (User.objects.count(), Group.objects.count(), SandboxDeploy.objects.count())
    seed()
    assert (User.objects.count(), Group.objects.count(), SandboxDeploy.objects.count()) == counts
    assert authenticate(username="bob", password="demo") is not None
    assert groups_of("bob") == {"approvers-write"}
