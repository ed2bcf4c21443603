# Runs are never lost (issue 17): when a queued run was last handed to the broker.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0002_telemetry_overview"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="dispatched_at",
            field=models.DateTimeField(
                blank=True,
                help_text="when a queued run was last handed to the broker (none: not yet)",
                null=True,
            ),
        ),
    ]
