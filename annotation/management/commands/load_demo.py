from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.models import Role, Study, Subspecialty
from annotation.roles import grant_role
from annotation.services import import_pairs, sample_pairs

DEMO_PAIRS = Path(__file__).resolve().parents[2] / "demo" / "pairs.jsonl"
DEMO_SLUG = "demo"
DEMO_SEED = 20260
DEMO_PASSWORD = "readingroom-demo"  # noqa: S105 - published on purpose, refused outside DEBUG

# username, roles, subspecialty
DEMO_USERS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("reader1", (Role.READER,), Subspecialty.CARDIOTHORACIC),
    ("reader2", (Role.READER,), Subspecialty.GENERAL),
    ("reader3", (Role.READER,), Subspecialty.ABDOMEN_PELVIS),
    ("reader4", (Role.READER,), Subspecialty.NEURORADIOLOGY),
    ("reader5", (Role.READER,), Subspecialty.GENERAL),
    ("adjudicator", (Role.ADJUDICATOR,), Subspecialty.CARDIOTHORACIC),
    ("coordinator", (Role.COORDINATOR,), None),
    ("datamanager", (Role.DATA_MANAGER,), None),
)


class Command(BaseCommand):
    help = "Load the demo study (synthetic reports) and one user per role. Safe to run again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force", action="store_true", help="Run even with DEBUG off (the demo password is public)."
        )

    def handle(self, *args, **options) -> None:
        if not settings.DEBUG and not options["force"]:
            raise CommandError(
                "load_demo creates users with a published password. Run it on a development database "
                "with DEBUG=1, or pass --force if you really mean to."
            )
        with transaction.atomic():
            study = Study.objects.filter(slug=DEMO_SLUG).first()
            if study is None:
                study = Study.objects.create_with_taxonomy(slug=DEMO_SLUG, name="Demo study (synthetic reports)")
            report = import_pairs(study, DEMO_PAIRS.read_bytes(), filename=DEMO_PAIRS.name)
            if not study.reading_has_started():
                sample = sample_pairs(study, per_variation=1, seed=DEMO_SEED)
                self.stdout.write(sample.summary)
            User = get_user_model()
            for username, roles, subspecialty in DEMO_USERS:
                user, created = User.objects.get_or_create(
                    username=username, defaults={"email": f"{username}@demo.invalid"}
                )
                if created:
                    user.set_password(DEMO_PASSWORD)
                    user.save()
                for role in roles:
                    grant_role(user, role, subspecialty=subspecialty)
            admin, created = User.objects.get_or_create(
                username="admin", defaults={"is_staff": True, "is_superuser": True, "email": "admin@demo.invalid"}
            )
            if created:
                admin.set_password(DEMO_PASSWORD)
                admin.save()

        self.stdout.write(report.summary)
        self.stdout.write(self.style.SUCCESS(f"Demo study '{study.slug}' is ready."))
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for username, roles, subspecialty in DEMO_USERS:
            detail = ", ".join(roles) + (f" ({subspecialty})" if subspecialty else "")
            self.stdout.write(f"  {username:<12} {detail}")
        self.stdout.write(f"  {'admin':<12} administrator")
