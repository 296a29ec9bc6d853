"""Build the metrics rollups (0013) from the approvals an upgraded database already holds.

Without it the metrics page of an upgraded console would count nothing decided before the
upgrade until someone ran ``manage.py metrics_backfill``. The rebuild is the command's own
(SQL on Postgres, about 20 s per million approvals); a new database has nothing to count. It
calls the app's code: if a later change makes that impossible, this migration's body may
become a no-op (the command stays the way to rebuild).
"""

from __future__ import annotations

from django.db import migrations


def rollups_fill(apps, schema_editor):
    from approvals.rollup_rebuild import rollups_rebuild

    rollups_rebuild(progress=lambda message: None)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0015_due_indexes"),
    ]

    operations = [
        migrations.RunPython(rollups_fill, migrations.RunPython.noop, elidable=True),
    ]
