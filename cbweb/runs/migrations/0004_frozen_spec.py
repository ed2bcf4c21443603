"""Runs keep a frozen copy of what they ran, so that deleting a workflow leaves them whole.

The version link becomes SET_NULL: deleting a workflow (and its versions) keeps every run, its
results and its spec.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def copy_from_versions(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.select_related("workflow_version__workflow").iterator(chunk_size=500):
        version = run.workflow_version
        Run.objects.filter(pk=run.pk).update(
            workflow_name=version.workflow.name,
            version_number=version.number,
            spec=version.spec,
            yaml=version.yaml,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_reliability"),
        ("workflows", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="workflow_name",
            field=models.CharField(default="", max_length=200),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="run",
            name="version_number",
            field=models.PositiveIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="run",
            name="spec",
            field=models.JSONField(
                default=dict, help_text="the canonical spec the run executes (frozen at launch)"
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="run",
            name="yaml",
            field=models.TextField(default="", help_text="the canonical YAML of that spec"),
            preserve_default=False,
        ),
        migrations.RunPython(copy_from_versions, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="workflow_version",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="runs",
                to="workflows.workflowversion",
            ),
        ),
    ]
