import argparse

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study, Task
from judges.services import EnrolmentRefused, enrol_judge


class Command(BaseCommand):
    help = (
        "Enrol an automated judge (an account with the judge role) in a study: every sampled example of the "
        "chosen tasks, or a seeded random subset of N pairs per variation. The same service as the study's "
        "Automated judges page and POST /api/studies/<slug>/judges/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--judge", required=True, help="Username of the judge account.")
        parser.add_argument("--task", action="append", choices=Task.values, help="Repeat for both (default: both).")
        parser.add_argument("--per-variation", type=int, help="Pairs per variation (default: every sampled pair).")
        parser.add_argument("--seed", type=int, help="Draws the subset (default: the study's seed).")
        parser.add_argument(
            "--practise",
            action=argparse.BooleanOptionalAction,
            help="Confirm the study's guide and rate its practice items first, as a reader does (--no-practise: skip "
            "them; default: skip for a new enrolment, unchanged otherwise).",
        )

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study '{options['study']}'.")
        judge = get_user_model().objects.filter(username=options["judge"]).first()
        if judge is None:
            raise CommandError(f"No user '{options['judge']}'. Create it with create_user --role judge --token.")
        try:
            result = enrol_judge(
                study,
                judge=judge,
                tasks=options["task"] or list(Task.values),
                per_variation=options["per_variation"],
                seed=options["seed"],
                practise=options["practise"],
            )
        except EnrolmentRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(self.style.SUCCESS(result.message))
