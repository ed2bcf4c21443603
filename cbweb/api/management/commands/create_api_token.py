"""``manage.py create_api_token USERNAME``: create the user if needed and print a new API token last."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from cbweb.api.services import token_create


class Command(BaseCommand):
    help = (
        "Create a new API token for a user, creating the user if needed; the token is the last line. "
        "Tokens are stored hashed: this is the only time the key is shown."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--staff", action="store_true", help="make the user staff (may change everything)"
        )
        parser.add_argument("--name", default="", help="what the token is for (shown in the admin)")

    def handle(self, *args: Any, username: str, staff: bool, name: str, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            self.stderr.write(f"created user '{username}' (set a password with manage.py changepassword)")
        if staff and not user.is_staff:
            user.is_staff = True
        user.save()
        token, key = token_create(user=user, name=name)
        self.stderr.write(
            f"token {token.prefix}… for '{username}': keep it now, it is stored hashed and cannot be shown "
            "again (revoke it in the admin)"
        )
        self.stdout.write(key)
