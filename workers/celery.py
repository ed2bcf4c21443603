"""The Celery app of ConsumerBench (``celery -A workers worker``); configured from cbweb.settings.

Every ``CELERY_*`` setting in cbweb/settings.py applies here (JSON only, acks late, prefetch 1).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")

app = Celery("consumerbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.include = ["workers.tasks"]
