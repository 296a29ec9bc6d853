"""The "compliance" group: may read and export the whole audit trail (audit.view_audit)."""

from django.db import migrations


def create_group(apps, schema_editor):
    db = schema_editor.connection.alias
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.using(db).get_or_create(
        app_label="audit", model="auditevent"
    )
    permission, _ = Permission.objects.using(db).get_or_create(
        content_type=content_type,
        codename="view_audit",
        defaults={"name": "Can view and export the whole audit trail"},
    )
    group, _ = Group.objects.using(db).get_or_create(name="compliance")
    group.permissions.add(permission)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0003_append_only_triggers"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(create_group, migrations.RunPython.noop),
    ]
