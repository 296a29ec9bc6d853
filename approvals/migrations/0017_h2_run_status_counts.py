"""Runs by status per creation day, kept by triggers (approvals/rollup_runs.py).

Creates the two tables, installs the triggers on approvals_agentrun, counts the runs an upgraded
database already holds (so the metrics page loses nothing on upgrade), and schedules the
compaction every minute. It calls the app's code for the SQL, like 0016.
"""

from __future__ import annotations

from django.db import migrations, models

SCHEDULE = ("Compact run status counts (metrics)", "approvals.rollup_runs.run_status_compact")


def install(apps, schema_editor):
    from approvals.rollup_runs import run_status_rebuild, triggers_sql

    with schema_editor.connection.cursor() as cursor:
        for statement in triggers_sql(schema_editor.connection.vendor):
            cursor.execute(statement)
    run_status_rebuild()
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=SCHEDULE[0],
        defaults={"func": SCHEDULE[1], "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    from approvals.rollup_runs import triggers_drop_sql

    with schema_editor.connection.cursor() as cursor:
        for statement in triggers_drop_sql(schema_editor.connection.vendor):
            cursor.execute(statement)
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0016_metrics_rollup_fill"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunStatusCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.IntegerField()),
                ("status", models.CharField(max_length=12)),
                ("n", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("day", "status"), name="run_status_count_cell")
                ],
            },
        ),
        migrations.CreateModel(
            name="RunStatusDelta",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("day", models.IntegerField()),
                ("status", models.CharField(max_length=12)),
                ("n", models.SmallIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["day"], name="run_status_delta_day")],
            },
        ),
        migrations.RunPython(install, remove),
    ]
