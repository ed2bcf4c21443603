"""WSGI entry point (gunicorn cbweb.wsgi, and runserver)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")
application = get_wsgi_application()

# Without a broker, this web process executes and sweeps runs itself: start at once, not with the
# first run it queues, so that runs left queued or running by a previous server are repaired.
from cbweb.runs.dispatch import start_local_executor  # noqa: E402

start_local_executor()
