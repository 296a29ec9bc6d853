"""Create the "managers" group: its members may read the approval metrics (/metrics/)."""

from django.db import migrations

MANAGERS_GROUP = "managers"


def create(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.get_or_create(name=MANAGERS_GROUP)


class Migration(migrations.Migration):
    dependencies = [("auth", "0012_alter_user_first_name_max_length")]

    # Reversing keeps the group: people may have been added to it since.
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
