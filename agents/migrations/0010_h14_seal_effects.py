"""Effect args, result and error are sealed under their run's data key (core/sealing.py).

State only: the columns keep their types (a sealed value is a JSON object in a JSON column,
its JSON text in a text column). A database AlterField would make SQLite rebuild
agents_effect, and a rebuilt table has lost its append-only triggers (_append_only.py).
Rows written before stay plaintext and read as they are.
"""

from __future__ import annotations

from django.db import migrations

import core.sealed_fields


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0009_h14_retention"),
        ("core", "0001_h14_datakeys"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="effect",
                    name="args",
                    field=core.sealed_fields.SealedJSONField(default=dict, run_attr="run_id"),
                ),
                migrations.AlterField(
                    model_name="effect",
                    name="error",
                    field=core.sealed_fields.SealedTextField(blank=True, run_attr="run_id"),
                ),
                migrations.AlterField(
                    model_name="effect",
                    name="result",
                    field=core.sealed_fields.SealedJSONField(
                        blank=True, default=dict, run_attr="run_id"
                    ),
                ),
            ],
        ),
    ]
