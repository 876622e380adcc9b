from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from annotation.importing import ImportRejected
from annotation.models import Study
from annotation.progress import progress_bar
from annotation.services import import_pairs


class _DryRunRollback(Exception):
    pass


class Command(BaseCommand):
    help = "Import candidate pairs (CSV or JSON Lines) into a study, all or nothing."
    # import_rewrites is this command with the rewrite service.
    service = staticmethod(import_pairs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="A .csv or .jsonl file; see the README for the columns.")
        parser.add_argument("--study", required=True, help="Study slug; the study is created if it does not exist.")
        parser.add_argument("--name", default="", help="Name of the study, if this creates it.")
        parser.add_argument("--dry-run", action="store_true", help="Check the file and report; change nothing.")
        parser.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")

    def handle(self, *args, **options) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file.")
        data = path.read_bytes()
        dry_run = options["dry_run"]
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = progress_bar(total=total, unit="pairs", desc="Importing", file=self.stderr._out)
            bar.update(done - bar.n)

        try:
            with transaction.atomic():
                study = Study.objects.filter(slug=options["study"]).first()
                created = study is None
                if created:
                    study = Study.objects.create_with_taxonomy(slug=options["study"], name=options["name"])
                report = self.service(study, data, filename=path.name, dry_run=dry_run, progress=progress)
                if dry_run:
                    raise _DryRunRollback
        except _DryRunRollback:
            pass
        except ImportRejected as rejected:
            for problem in rejected.problems:
                self.stderr.write(f"{path.name}: {problem}")
            raise CommandError(f"Nothing was imported: {len(rejected.problems)} problem(s) in {path.name}.") from None
        finally:
            if bar is not None:
                bar.close()

        if created:
            verb = "Would create" if dry_run else "Created"
            self.stdout.write(f"{verb} study '{study.slug}' with the default ReRef taxonomy (12 variations).")
        self.stdout.write(self.style.SUCCESS(report.summary))
