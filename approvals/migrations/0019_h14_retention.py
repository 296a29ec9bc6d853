"""An index of finished runs in (finished_at, id) order: checkpoint retention
(agents/runtime/retention.py) reads them from where its last pass stopped."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0018_h6_pending_approval_counts"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="agentrun",
            index=models.Index(
                condition=models.Q(("finished_at__isnull", False)),
                fields=["finished_at", "id"],
                name="run_finished",
            ),
        ),
    ]
