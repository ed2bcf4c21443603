# Result schema 3 (docs/result-format.md): attainment is over the requests the workflow asked for
# (``requests_requested``) and fairness is Jain's index over the applications' attainment. Runs stored
# before did not record the ask: it is taken as their counted requests, and their fairness recomputed.

from typing import Any

from django.db import migrations, models
from django.db.models import F

from benchmarks.results import upgrade


def to_schema_3(apps: Any, schema_editor: Any) -> None:
    """Fill ``requests_requested`` and rewrite the stored result documents and run summaries."""
    ApplicationResult = apps.get_model("runs", "ApplicationResult")
    Run = apps.get_model("runs", "Run")
    ApplicationResult.objects.update(requests_requested=F("requests_counted"))
    for run in Run.objects.filter(result__schema_version=2).iterator():
        run.result = upgrade(run.result)
        if run.summary:
            served = run.result["requests_served"]
            run.summary = {
                **run.summary,
                "fairness": run.result["fairness"],
                "partial": run.status != "succeeded",
                "requests_served": served,
                "requests_requested": run.result["requests_requested"],
            }
        run.save(update_fields=["result", "summary"])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0006_typed_results"),
    ]

    operations = [
        migrations.AddField(
            model_name="applicationresult",
            name="requests_requested",
            field=models.PositiveIntegerField(
                default=0, help_text="what the workflow asked for: the attainment's denominator"
            ),
        ),
        migrations.RunPython(to_schema_3, migrations.RunPython.noop),
    ]
