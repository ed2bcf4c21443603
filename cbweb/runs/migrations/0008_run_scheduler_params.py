from typing import Any

from django.db import migrations, models


def backfill_from_results(apps: Any, schema_editor: Any) -> None:
    """A finished run's result already says which parameters the scheduler ran with (credit wrote
    them before issue 19); copy them so that its page and the leaderboard show them."""
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.exclude(result=None).only("pk", "result").iterator():
        params = ((run.result or {}).get("scheduler") or {}).get("params")
        if isinstance(params, dict) and params:
            Run.objects.filter(pk=run.pk).update(scheduler_params=params)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_applicationresult_quality"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="scheduler_params",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="the scheduler's effective parameters (defaults filled in)",
            ),
        ),
        migrations.RunPython(backfill_from_results, migrations.RunPython.noop),
    ]
