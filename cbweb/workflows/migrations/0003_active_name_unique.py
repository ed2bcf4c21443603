"""An owner's active workflows get distinct names. Where earlier versions let several share one (the
old POST /api/v1/workflows/ made a new workflow each time), the most recently updated keeps the name,
which is the one ``submit`` reused, and each other gets its id appended: "name (#12)". Nothing else
changes; runs keep the name they ran under."""

from typing import Any

from django.db import migrations, models


def rename_duplicates(apps: Any, schema_editor: Any) -> None:
    Workflow = apps.get_model("workflows", "Workflow")
    limit = Workflow._meta.get_field("name").max_length
    active = Workflow.objects.filter(archived=False)
    # Every active name, so that a new name never takes one in use ("x (#5)" may exist already).
    taken: set[tuple[int, str]] = set(active.values_list("owner_id", "name"))
    kept: set[tuple[int, str]] = set()
    for pk, owner_id, name in active.order_by("-updated_at", "-id").values_list("pk", "owner_id", "name"):
        if (owner_id, name) not in kept:
            kept.add((owner_id, name))
            continue
        n, suffix = 1, f" (#{pk})"
        while (owner_id, new := name[: limit - len(suffix)] + suffix) in taken:
            n += 1
            suffix = f" (#{pk}-{n})"
        taken.add((owner_id, new))
        # .update leaves updated_at as it was.
        Workflow.objects.filter(pk=pk).update(name=new)


class Migration(migrations.Migration):
    dependencies = [
        ("workflows", "0002_archived"),
    ]

    operations = [
        migrations.RunPython(rename_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="workflow",
            constraint=models.UniqueConstraint(
                condition=models.Q(("archived", False)),
                fields=("owner", "name"),
                name="workflow_active_name_unique",
            ),
        ),
    ]
