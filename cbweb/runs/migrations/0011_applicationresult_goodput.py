from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_run_metadata"),
    ]

    operations = [
        migrations.AddField(
            model_name="applicationresult",
            name="goodput_rps",
            field=models.FloatField(help_text="requests that met every SLO per second", null=True),
        ),
    ]
