from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis.services import import_metric_scores
from annotation.importing import ImportRejected
from annotation.models import Study


class Command(BaseCommand):
    help = (
        "Import metric scores computed elsewhere (CSV: dataset, study_id, reref_variation, metric, score, and "
        "optionally perfect_score) for a study's sampled pairs, all or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The CSV file.")
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--replace", action="store_true", help="Replace the stored scores of the file's metrics.")
        parser.add_argument("--dry-run", action="store_true", help="Check the file; import nothing.")

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f"No study '{options['study']}'.")
        try:
            data = options["path"].read_bytes()
        except OSError as error:
            raise CommandError(f"{options['path']}: {error.strerror}.") from None
        try:
            report = import_metric_scores(study, data, dry_run=options["dry_run"], replace=options["replace"])
        except ImportRejected as rejected:
            problems = "\n".join(f"  {problem}" for problem in rejected.problems)
            raise CommandError(f"{options['path']}: nothing was imported.\n{problems}") from None
        self.stdout.write(report.summary())
