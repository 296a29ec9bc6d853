"""The database cache's table (settings.CACHES), so `migrate` alone makes a working install.

`createcachetable` does nothing for a cache that is not the database's (Redis) or a table
that exists; run it again after renaming the table in the settings.
"""

from django.core.management import call_command
from django.db import migrations


def cache_table_create(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("console", "0002_api_tokens")]

    operations = [migrations.RunPython(cache_table_create, migrations.RunPython.noop)]
