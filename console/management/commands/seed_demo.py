"""Seed the demo people, groups and sandbox deploys. Safe to run again: it converges.

Later features extend the data tables below (PEOPLE, GROUPS, DEPLOYS) rather than the code.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import Group, Permission, User
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from agents.models import SandboxDeploy
from approvals.services import policy_seed_demo
from audit.services import compliance_group_ensure

DEMO_PASSWORD = "demo"


@dataclass(frozen=True)
class DemoPerson:
    username: str
    role: str
    groups: tuple[str, ...] = ()
    perms: tuple[str, ...] = ()
    superuser: bool = False


@dataclass(frozen=True)
class DemoDeploy:
    service: str
    version: str
    previous_version: str
    age: dt.timedelta


GROUPS: tuple[str, ...] = ("approvers-write", "approvers-critical", "compliance", "managers")

PEOPLE: tuple[DemoPerson, ...] = (
    DemoPerson("alice", "requester: starts runs"),
    DemoPerson("bob", "approver (write)", groups=("approvers-write",), perms=("approvals.decide",)),
    DemoPerson(
        "carol",
        "senior approver (write and critical)",
        groups=("approvers-write", "approvers-critical"),
        perms=("approvals.decide",),
    ),
    DemoPerson("dave", "no rights"),
    DemoPerson("erin", "manager: approval metrics", groups=("managers",)),
    DemoPerson(
        "frank", "compliance: reads every run, the audit trail, exports", groups=("compliance",)
    ),
    DemoPerson("admin", "superuser (Django admin)", superuser=True),
)

# Ages are relative to the moment of seeding, so the checkout deploy is always recent.
DEPLOYS: tuple[DemoDeploy, ...] = (
    DemoDeploy("checkout", "2024.06.3", "2024.06.2", dt.timedelta(minutes=20)),
    DemoDeploy("payments", "5.14.0", "5.13.2", dt.timedelta(days=3)),
    DemoDeploy("search", "1.9.1", "1.9.0", dt.timedelta(days=2, hours=5)),
    DemoDeploy("inventory", "3.2.0", "3.1.4", dt.timedelta(days=6)),
)


def demo_groups_seed(*, names: tuple[str, ...] = GROUPS) -> dict[str, Group]:
    groups = {name: Group.objects.get_or_create(name=name)[0] for name in names}
    # The compliance group's right (audit.view_audit) is granted here too, not only by the
    # post_migrate hook, so frank reads the audit trail on any database seed_demo runs on.
    groups["compliance"] = compliance_group_ensure()
    return groups


def demo_person_seed(*, person: DemoPerson, groups: dict[str, Group]) -> User:
    """Create or reset one person: password, flags, groups and permissions as declared."""
    user, _ = User.objects.get_or_create(
        username=person.username, defaults={"email": f"{person.username}@example.com"}
    )
    user.set_password(DEMO_PASSWORD)
    user.is_superuser = person.superuser
    user.is_staff = person.superuser
    user.is_active = True
    user.save()
    user.groups.set([groups[name] for name in person.groups])
    user.user_permissions.set([_permission(perm) for perm in person.perms])
    return user


def demo_deploy_seed(*, deploy: DemoDeploy, now: dt.datetime) -> SandboxDeploy:
    row, _ = SandboxDeploy.objects.update_or_create(
        idempotency_key=f"seed:deploy:{deploy.service}",
        defaults={
            "service": deploy.service,
            "version": deploy.version,
            "previous_version": deploy.previous_version,
            "is_rollback": False,
            "deployed_at": now - deploy.age,
        },
    )
    return row


def _permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".", 1)
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


class Command(BaseCommand):
    help = "Seed demo people (password 'demo'), approver groups and sandbox deploys."

    def handle(self, *args, **options) -> None:
        now = timezone.now()
        with transaction.atomic():
            groups = demo_groups_seed()
            for person in PEOPLE:
                demo_person_seed(person=person, groups=groups)
            for deploy in DEPLOYS:
                demo_deploy_seed(deploy=deploy, now=now)
            policy_seed_demo()  # tiers read / write / critical and tool policies
        self.stdout.write("Demo logins (password for everyone: demo):")
        for person in PEOPLE:
            self.stdout.write(f"  {person.username:<6} {person.role}")
        self.stdout.write(
            f"Sandbox deploys: {', '.join(f'{d.service}@{d.version}' for d in DEPLOYS)}"
        )
