"""AuditExport.opened: the file also carries each event's data with sealed keys opened."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0007_tool_at_seq_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditexport",
            name="opened",
            field=models.BooleanField(default=False),
        ),
    ]
