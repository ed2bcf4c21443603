# Result schema 3 (docs/result-format.md): attainment is over the requests the workflow asked for
# (``requests_requested``) and fairness is Jain's index over the applications' attainment. Runs stored
# before did not record the ask: it is taken as their counted requests, and their fairness recomputed.

from typing import Any

from django.db import migrations, models
from django.db.models import F

from benchmarks.results import headline, upgrade


def to_schema_3(apps: Any, schema_editor: Any) -> None:
    """Fill ``requests_requested`` and rewrite the stored result documents and run summaries (runs
    of schema 1 were upgraded by 0006 with the code of their day: their summaries are rewritten too)."""
    ApplicationResult = apps.get_model("runs", "ApplicationResult")
    Run = apps.get_model("runs", "Run")
    ApplicationResult.objects.update(requests_requested=F("requests_counted"))
    for run in Run.objects.exclude(result__isnull=True).iterator():
        result = upgrade(run.result)
        summary = run.summary
        if summary and "partial" not in summary:
            partial = run.status != "succeeded"
            served, requested = result.get("requests_served", 0), result.get("requests_requested", 0)
            summary = {
                **summary,
                "headline": headline(summary.get("mean_attainment"), served, requested, partial),
                "fairness": result.get("fairness"),
                "partial": partial,
                "requests_served": served,
                "requests_requested": requested,
            }
        if result != run.result or summary != run.summary:
            run.result, run.summary = result, summary
            run.save(update_fields=["result", "summary"])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_scheduler_params"),
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
