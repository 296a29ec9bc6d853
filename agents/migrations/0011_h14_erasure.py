"""Erasure: the Erasure record, the subjects' blind index, and "agents.erase_run" granted to
the compliance group (agents/apps.py keeps the grant after a test flush)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def grant(apps, schema_editor):
    db = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.using(db).get_or_create(
        app_label="agents", model="erasure"
    )
    permission, _ = Permission.objects.using(db).get_or_create(
        content_type=content_type,
        codename="erase_run",
        defaults={"name": "Can erase the personal data of runs"},
    )
    group, _ = Group.objects.using(db).get_or_create(name="compliance")
    group.permissions.add(permission)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0010_h14_seal_effects"),
        ("approvals", "0021_h14_erased_at"),
        ("core", "0001_h14_datakeys"),
        ("audit", "0004_compliance_group"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Erasure",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("username", models.CharField(max_length=150)),
                ("reason", models.TextField()),
                (
                    "kind",
                    models.CharField(
                        choices=[("run", "Run"), ("subject", "Subject")], max_length=10
                    ),
                ),
                ("run_ids", models.JSONField(default=list)),
                (
                    "status",
                    models.CharField(
                        choices=[("keys_destroyed", "Keys Destroyed"), ("completed", "Completed")],
                        db_index=True,
                        default="keys_destroyed",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "permissions": [("erase_run", "Can erase the personal data of runs")],
                "default_permissions": ("view",),
            },
        ),
        migrations.CreateModel(
            name="SubjectIndex",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("kind", models.CharField(max_length=30)),
                ("digest", models.CharField(db_index=True, max_length=64)),
                ("key_id", models.CharField(max_length=32)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="approvals.agentrun",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "kind", "digest"), name="subject_index_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(grant, migrations.RunPython.noop),
    ]
