# Result schema 2 (docs/result-format.md): an application's SLOs are stored as {metric, op, threshold_s}
# instead of strings such as "ttft<=1.0s"; statuses get their choices from benchmarks.status.

from typing import Any

from django.db import migrations, models

from benchmarks.results import slo_of_v1, upgrade


def slos_to_schema_2(apps: Any, schema_editor: Any) -> None:
    """Rewrite the runs stored before schema 2: their applications' SLOs and their result document."""
    ApplicationResult = apps.get_model("runs", "ApplicationResult")
    Run = apps.get_model("runs", "Run")
    for app in ApplicationResult.objects.exclude(slo=[]).iterator():
        slo = [slo_of_v1(s) for s in app.slo]
        if slo != app.slo:
            app.slo = slo
            app.save(update_fields=["slo"])
    for run in Run.objects.filter(result__schema_version=1).iterator():
        run.result = upgrade(run.result)
        run.save(update_fields=["result"])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_redispatch_backoff"),
    ]

    operations = [
        migrations.AlterField(
            model_name="applicationresult",
            name="slo",
            field=models.JSONField(
                default=list, help_text="[{metric, op, threshold_s}] (benchmarks.spec.SLO)"
            ),
        ),
        migrations.AlterField(
            model_name="noderesult",
            name="status",
            field=models.CharField(
                choices=[
                    ("succeeded", "succeeded"),
                    ("failed", "failed"),
                    ("stopped", "stopped"),
                    ("skipped", "skipped"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="requestresult",
            name="status",
            field=models.CharField(
                choices=[("ok", "ok"), ("interrupted", "interrupted"), ("error", "error")], max_length=20
            ),
        ),
        migrations.RunPython(slos_to_schema_2, migrations.RunPython.noop),
    ]
