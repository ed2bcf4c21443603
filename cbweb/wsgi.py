"""WSGI entry point (gunicorn cbweb.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")
application = get_wsgi_application()
