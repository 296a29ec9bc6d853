"""Pending approvals per creation day, tier, tool and agent, kept by triggers
(approvals/rollup_pending.py).

Creates the two tables, installs the triggers on approvals_approvalrequest, counts the pending
approvals an upgraded database already holds, and schedules the compaction every minute.
"""

from __future__ import annotations

from django.db import migrations, models

SCHEDULE = ("Compact pending approval counts (metrics)", "approvals.rollup_pending.pending_compact")


def install(apps, schema_editor):
    from approvals.rollup_pending import pending_rebuild, triggers_sql

    with schema_editor.connection.cursor() as cursor:
        for statement in triggers_sql(schema_editor.connection.vendor):
            cursor.execute(statement)
    pending_rebuild()
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=SCHEDULE[0],
        defaults={"func": SCHEDULE[1], "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    from approvals.rollup_pending import triggers_drop_sql

    with schema_editor.connection.cursor() as cursor:
        for statement in triggers_drop_sql(schema_editor.connection.vendor):
            cursor.execute(statement)
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0017_h2_run_status_counts"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingApprovalCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.IntegerField()),
                ("tier", models.CharField(max_length=40)),
                ("tool", models.CharField(max_length=100)),
                ("agent", models.CharField(max_length=100)),
                ("n", models.BigIntegerField(default=0)),
                ("escalated", models.BigIntegerField(default=0)),
                ("reminded", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("day", "tier", "tool", "agent"), name="pending_approval_count_cell"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="PendingApprovalDelta",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("day", models.IntegerField()),
                ("tier", models.CharField(max_length=40)),
                ("tool", models.CharField(max_length=100)),
                ("agent", models.CharField(max_length=100, null=True)),
                ("run_id", models.CharField(blank=True, max_length=36)),
                ("n", models.SmallIntegerField()),
                ("escalated", models.SmallIntegerField()),
                ("reminded", models.SmallIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["day"], name="pending_approval_delta_day")],
            },
        ),
        migrations.RunPython(install, remove),
    ]
