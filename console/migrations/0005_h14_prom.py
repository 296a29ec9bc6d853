"""The worker heartbeat row and its every-minute task (/readyz: a worker was seen recently)."""

from django.db import migrations, models

# SCHEDULES + install(): the shape tests/support/fixtures.py re-installs after a test flush.
SCHEDULES = [("Worker heartbeat (readiness)", "console.tasks.worker_heartbeat")]


def install(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES:
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1}
        )


def remove(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name__in=[name for name, _ in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_drop_drf_tokens"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerHeartbeat",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("host", models.CharField(max_length=255, unique=True)),
                ("pid", models.PositiveIntegerField(default=0)),
                ("seen_at", models.DateTimeField()),
            ],
            options={"ordering": ["-seen_at"]},
        ),
        migrations.RunPython(install, remove),
    ]
