"""Checkpoint retention: per-agent policies, the runs pruned, where passes stopped, and the
every-minute prune pass (agents.tasks.checkpoints_prune) as a django-q2 Schedule."""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

SCHEDULE = ("Prune old checkpoints (retention)", "agents.tasks.checkpoints_prune")


def install(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.update_or_create(
        name=SCHEDULE[0],
        defaults={"func": SCHEDULE[1], "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SCHEDULE[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0008_due_indexes"),
        ("approvals", "0018_h6_pending_approval_counts"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="RetentionCursor",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("scope", models.CharField(max_length=100, unique=True)),
                ("finished_at", models.DateTimeField()),
                ("run_id", models.UUIDField()),
            ],
        ),
        migrations.CreateModel(
            name="RetentionPolicy",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("agent", models.CharField(max_length=100, unique=True)),
                (
                    "keep_days",
                    models.PositiveIntegerField(
                        help_text="Days a finished run keeps every checkpoint; 0 keeps them "
                        "forever."
                    ),
                ),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("final", "Prune to the final checkpoint"),
                            ("delete", "Delete the thread's checkpoints"),
                        ],
                        default="final",
                        max_length=10,
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "checkpoint retention policy",
                "verbose_name_plural": "checkpoint retention policies",
                "ordering": ["agent"],
            },
        ),
        migrations.CreateModel(
            name="PrunedRun",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="approvals.agentrun",
                    ),
                ),
                (
                    "outcome",
                    models.CharField(
                        choices=[
                            ("final", "Pruned to the final checkpoint"),
                            ("delete", "Checkpoints deleted"),
                            ("kept", "Kept: retention cannot prune it"),
                        ],
                        max_length=10,
                    ),
                ),
                ("reason", models.CharField(blank=True, max_length=200)),
                ("pruned_at", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["pruned_at"], name="pruned_run_at")],
            },
        ),
        migrations.CreateModel(
            name="RetentionPass",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField()),
                ("runs_final", models.PositiveIntegerField(default=0)),
                ("runs_deleted", models.PositiveIntegerField(default=0)),
                ("runs_kept", models.PositiveIntegerField(default=0)),
                ("runs_deferred", models.PositiveIntegerField(default=0)),
                ("checkpoints", models.PositiveBigIntegerField(default=0)),
                ("writes", models.PositiveBigIntegerField(default=0)),
                ("blobs", models.PositiveBigIntegerField(default=0)),
                ("seconds", models.FloatField(default=0)),
            ],
            options={"ordering": ["-id"]},
        ),
        migrations.RunPython(install, remove),
    ]
