"""Install the periodic jobs the cluster runs (every minute)."""

from django.db import migrations

SCHEDULES = [
    ("Recover runs whose worker died", "agents.tasks.runs_recover"),
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
        ("approvals", "0002_run_fork_fields"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]
    operations = [migrations.RunPython(install, remove)]
