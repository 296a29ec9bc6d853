"""DRF's tokens (rest_framework.authtoken) kept their secrets in clear: the table goes.

They stop working (README: API tokens); a client asks /api/auth/token/ for a knox token.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("console", "0003_cache_table")]

    operations = [migrations.RunSQL("DROP TABLE IF EXISTS authtoken_token", migrations.RunSQL.noop)]
