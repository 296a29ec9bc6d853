"""Runs and approvals seal their personal data (core/sealing.py).

The columns keep their types (JSON stays JSON, text stays text): only the model state changes,
so no table is rebuilt (SQLite would otherwise copy every run and approval). Rows written
before stay plaintext and read as they are.
"""

from django.db import migrations

import core.sealed_fields


def _sealed(model_name: str, name: str, field: object) -> migrations.AlterField:
    return migrations.AlterField(model_name=model_name, name=name, field=field)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0021_h14_erased_at"),
        ("core", "0001_h14_datakeys"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _sealed(
                    "agentrun",
                    "error",
                    core.sealed_fields.SealedTextField(blank=True, run_attr="id"),
                ),
                _sealed(
                    "agentrun",
                    "input",
                    core.sealed_fields.SealedJSONField(default=dict, run_attr="id"),
                ),
                _sealed(
                    "agentrun",
                    "output",
                    core.sealed_fields.SealedJSONField(blank=True, default=dict, run_attr="id"),
                ),
                _sealed(
                    "agentrun",
                    "pending_migration",
                    core.sealed_fields.SealedJSONField(blank=True, null=True, run_attr="id"),
                ),
                _sealed(
                    "approvalrequest",
                    "args",
                    core.sealed_fields.SealedJSONField(default=dict, run_attr="run_id"),
                ),
                _sealed(
                    "approvalrequest",
                    "decision",
                    core.sealed_fields.SealedJSONField(blank=True, default=dict, run_attr="run_id"),
                ),
                _sealed(
                    "approvalrequest",
                    "original_args",
                    core.sealed_fields.SealedJSONField(blank=True, null=True, run_attr="run_id"),
                ),
                _sealed(
                    "approvalrequest",
                    "payload",
                    core.sealed_fields.SealedJSONField(default=dict, run_attr="run_id"),
                ),
                _sealed(
                    "approvalvote",
                    "args",
                    core.sealed_fields.SealedJSONField(default=dict, run_attr="approval.run_id"),
                ),
                _sealed(
                    "approvalvote",
                    "message",
                    core.sealed_fields.SealedTextField(blank=True, run_attr="approval.run_id"),
                ),
            ],
            database_operations=[],
        ),
    ]
