"""Move the keys of DRF's authtoken table (stored in clear) into ApiToken as digests, then drop it.

Every existing key keeps working (CI secrets need no change); none stays readable at rest. Raw SQL,
because rest_framework.authtoken is no longer an installed app whose model could be loaded.
"""

import datetime
import hashlib

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.utils import timezone
from django.utils.dateparse import parse_datetime

OLD_TABLE = "authtoken_token"


def hash_old_keys(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("api", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id, created FROM {OLD_TABLE}")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        if isinstance(created, str):
            created = parse_datetime(created)
        if created is not None and timezone.is_naive(created):
            created = timezone.make_aware(created, datetime.UTC)
        token = ApiToken.objects.create(
            user_id=user_id,
            name="authtoken",
            prefix=key[:6],
            digest=hashlib.sha256(key.encode("utf-8")).hexdigest(),
        )
        if created is not None:
            ApiToken.objects.filter(pk=token.pk).update(created_at=created)
    schema_editor.execute(f"DROP TABLE {OLD_TABLE}")
    # Its migrations are no longer applied: re-adding the app would create the table afresh.
    schema_editor.execute("DELETE FROM django_migrations WHERE app = %s", ["authtoken"])


class Migration(migrations.Migration):
    dependencies = [("api", "0001_initial")]

    # Backwards the digests stay: a digest cannot be turned back into its key.
    operations = [migrations.RunPython(hash_old_keys, migrations.RunPython.noop, elidable=False)]
