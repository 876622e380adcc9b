import secrets
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.models import Role, Subspecialty
from annotation.roles import RoleRefused, grant_role
from annotation.tokens import TokenRefused, issue_token, scopes_for


class Command(BaseCommand):
    help = "Create a user (or update an existing one) with one or more study roles."
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--role",
            action="append",
            choices=Role.values,
            required=True,
            help="Repeat for several roles. A judge (an automated judge: a program reading through the API) "
            "holds no other role.",
        )
        parser.add_argument("--subspecialty", choices=Subspecialty.values, help="For readers and adjudicators.")
        parser.add_argument("--email", default="")
        parser.add_argument("--first-name", default="")
        parser.add_argument("--last-name", default="")
        parser.add_argument(
            "--password-stdin", action="store_true", help="Read the password from standard input (one line)."
        )
        parser.add_argument(
            "--token",
            nargs="?",
            const="Command line",
            metavar="NAME",
            help='Make an API token with this name (default "Command line") and print its key, once. It acts '
            "with all the person's roles (a reader's: reading only). People make and revoke their own tokens "
            "on their Settings page.",
        )

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        password = None
        generated = False
        if options["password_stdin"]:
            password = options.get("stdin", sys.stdin).readline().rstrip("\r\n")
        with transaction.atomic():
            user, created = User.objects.get_or_create(
                username=options["username"],
                defaults={
                    "email": options["email"],
                    "first_name": options["first_name"],
                    "last_name": options["last_name"],
                },
            )
            if created and password is None:
                password = secrets.token_urlsafe(12)
                generated = True
            if password is not None:
                try:
                    validate_password(password, user)
                except ValidationError as error:
                    raise CommandError("Password rejected: " + " ".join(error.messages)) from None
                user.set_password(password)
                user.save()
            for role in options["role"]:
                try:
                    grant_role(user, role, subspecialty=options["subspecialty"])
                except RoleRefused as refused:
                    raise CommandError(str(refused)) from None
            key = None
            if options["token"] is not None:
                fresh = User.objects.get(pk=user.pk)  # the roles just granted
                try:
                    key = issue_token(fresh, name=options["token"], scope=scopes_for(fresh)[-1])[1]
                except TokenRefused as refused:
                    raise CommandError(str(refused)) from None

        roles = ", ".join(options["role"])
        self.stdout.write(self.style.SUCCESS(f"{'Created' if created else 'Updated'} {user.username} ({roles})."))
        if generated:
            self.stdout.write(f"Password: {password}")
        if key is not None:
            self.stdout.write(f"API token: {key}")
