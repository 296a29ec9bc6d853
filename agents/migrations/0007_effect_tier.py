"""The tier an escalated effect is settled in (its approvers see the run)."""

from django.db import migrations, models

from agents.migrations import _append_only


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_effect_settlement"),
    ]

    operations = [
        migrations.AddField(
            model_name="effect",
            name="tier",
            field=models.CharField(blank=True, max_length=40),
        ),
        # SQLite rebuilt the table for the new NOT NULL column, dropping its triggers.
        migrations.RunPython(_append_only.sqlite_reinstall, migrations.RunPython.noop),
    ]
