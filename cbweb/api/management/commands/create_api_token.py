"""``manage.py create_api_token USERNAME``: create the user if needed and print its API token last."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Create (or show) the API token of a user, creating the user if needed; the token is the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--staff", action="store_true", help="make the user staff (may change everything)"
        )

    def handle(self, *args: Any, username: str, staff: bool, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            self.stderr.write(f"created user '{username}' (set a password with manage.py changepassword)")
        if staff and not user.is_staff:
            user.is_staff = True
        user.save()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
