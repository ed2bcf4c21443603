"""``manage.py createsuperuser`` that also checks DJANGO_SUPERUSER_PASSWORD against the password
validators: Django checks typed passwords only, so ``--noinput`` would accept ``1``.

(cbweb.api comes before django.contrib.auth in INSTALLED_APPS so that this command wins.)
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError


class Command(createsuperuser.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        if not options["interactive"] and password is not None:
            # The class self.UserModel holds, typed as the configured user model (the stubs type
            # self.UserModel as AbstractBaseUser, which declares no USERNAME_FIELD).
            user_model = get_user_model()
            field = user_model.USERNAME_FIELD
            username = options.get(field) or os.environ.get(f"DJANGO_SUPERUSER_{field.upper()}", "")
            email = options.get("email") or os.environ.get("DJANGO_SUPERUSER_EMAIL", "")
            try:
                validate_password(password, user_model(**{field: username, "email": email}))
            except ValidationError as exc:
                raise CommandError(
                    f"DJANGO_SUPERUSER_PASSWORD is refused: {' '.join(exc.messages)}"
                ) from None
        super().handle(*args, **options)
