"""Install the approvals sweep (reminders, escalations, expiries, notification retries)."""

from django.db import migrations

SCHEDULES = [
    (
        "Sweep approvals: remind, escalate, expire, retry notifications",
        "approvals.tasks.approvals_sweep",
    ),
]


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
        ("approvals", "0004_policy"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]
    operations = [migrations.RunPython(install, remove)]
