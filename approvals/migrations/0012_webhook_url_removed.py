import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0011_webhook_endpoints"),
    ]

    operations = [
        migrations.AlterField(
            model_name="notification",
            name="message_id",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
        migrations.RemoveField(model_name="risktier", name="webhook_url"),
    ]
