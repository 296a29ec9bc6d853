"""chain_version and canonical on AuditEvent (docs/audit.md, "Canonical form").

Both are added with a plain ALTER TABLE ADD COLUMN on Postgres and SQLite: existing rows read
chain_version 1 from the column's constant default and canonical NULL; no row is rewritten, so
the append-only triggers (0003) neither fire nor, on SQLite, get dropped by a table rebuild
(which is what Django's own AddField of a column with a default would do there).
"""

from django.db import migrations, models

TABLE = "audit_auditevent"


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0004_compliance_group"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="canonical",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"ALTER TABLE {TABLE} ADD COLUMN chain_version smallint NOT NULL DEFAULT 1",
                    reverse_sql=f"ALTER TABLE {TABLE} DROP COLUMN chain_version",
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="auditevent",
                    name="chain_version",
                    field=models.SmallIntegerField(default=1),
                ),
            ],
        ),
    ]
