"""The tiers' webhook URLs become signed endpoints; rows waiting for a retry come along."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("approvals", "0010_run_lease_epoch")]
AFTER = [("approvals", "0012_webhook_url_removed")]
URL = "https://hooks.example.com/approvals"


def migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_each_tier_webhook_url_becomes_an_endpoint_and_pending_retries_are_signed():
    old = migrate(BEFORE)
    try:
        tiers = old.get_model("approvals", "RiskTier")
        notification = old.get_model("approvals", "Notification")
        tiers.objects.create(name="write", level=1, webhook_url=URL)
        tiers.objects.create(name="critical", level=2, webhook_url=URL)
        tiers.objects.create(name="read", level=0)
        now = dt.datetime.now(dt.UTC)
        for _ in range(2):
            notification.objects.create(
                event="request",
                channel="webhook",
                recipient=URL,
                subject="s",
                text="t",
                next_attempt_at=now,
            )

        new = migrate(AFTER)
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    endpoint = new.get_model("approvals", "WebhookEndpoint").objects.get()
    tiers = new.get_model("approvals", "RiskTier").objects.order_by("level")
    rows = new.get_model("approvals", "Notification").objects.all()
    assert (endpoint.url, endpoint.name, endpoint.is_active) == (URL, "write webhook", True)
    assert endpoint.secret.startswith("whsec_")
    assert [t.webhook_endpoint_id for t in tiers] == [None, endpoint.pk, endpoint.pk]
    assert {row.endpoint_id for row in rows} == {endpoint.pk}
    assert len({row.message_id for row in rows}) == 2
