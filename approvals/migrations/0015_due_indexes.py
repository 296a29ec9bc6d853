"""Partial indexes on the runs recovery may take, by their due time (agents/runtime/recovery.py).

Each covers only running/queued or woken runs without a lease, a small share of the table, so
recovery reads the due runs and nothing else, and the index costs little to keep up.
"""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0013_metrics_rollup"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="agentrun",
            index=models.Index(
                condition=models.Q(
                    ("flag", ""),
                    ("lease_expires_at__isnull", False),
                    ("status__in", ["running", "queued"]),
                ),
                fields=["updated_at"],
                name="run_lease_due",
            ),
        ),
        migrations.AddIndex(
            model_name="agentrun",
            index=models.Index(
                condition=models.Q(
                    ("flag", ""),
                    ("lease_expires_at__isnull", True),
                    ("status__in", ["running", "queued"]),
                ),
                fields=["updated_at"],
                name="run_orphan_due",
            ),
        ),
        migrations.AddIndex(
            model_name="agentrun",
            index=models.Index(
                condition=models.Q(("lease_expires_at__isnull", True), ("wake_requested", True)),
                fields=["updated_at"],
                name="run_wake_due",
            ),
        ),
    ]
