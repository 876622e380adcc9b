from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study
from annotation.services import SamplingRefused, sample_pairs


class Command(BaseCommand):
    help = "Draw the study sample: N accepted pairs per (dataset, variation), reproducible from a seed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--per-variation", type=int, required=True, help="Pairs per dataset and variation.")
        parser.add_argument("--seed", type=int, help="Random seed (default: the study's own seed).")
        parser.add_argument("--datasets", nargs="+", help="Sample only these datasets (default: all with candidates).")
        parser.add_argument(
            "--one-pair-per-exam",
            action="store_true",
            help="Draw at most one pair per exam (a variation passes over the exams drawn for an earlier one).",
        )

    def handle(self, *args, **options) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist:
            raise CommandError(f"No study '{options['study']}'. Import pairs into it first.") from None
        try:
            report = sample_pairs(
                study,
                per_variation=options["per_variation"],
                seed=options["seed"],
                datasets=options["datasets"],
                one_pair_per_exam=options["one_pair_per_exam"],
            )
        except SamplingRefused as refused:
            raise CommandError(str(refused)) from None
        for message in report.shortfall_messages():
            self.stderr.write(self.style.WARNING(message))
        self.stdout.write(self.style.SUCCESS(report.summary))
