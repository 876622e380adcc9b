from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.importing import ImportRejected
from annotation.models import Dataset
from annotation.progress import progress_bar
from annotation.reports import READERS
from annotation.services import import_reports


class Command(BaseCommand):
    help = "Store a dataset's original reports, read from its own files as distributed, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The dataset's report file, folder or zip; see the README.")
        parser.add_argument("--dataset", required=True, choices=list(READERS), help="Which dataset's layout.")
        parser.add_argument("--split-csv", type=Path, help="MIMIC-CXR: mimic-cxr-2.0.0-split.csv(.gz).")
        parser.add_argument("--split", help="MIMIC-CXR: keep only this split of --split-csv (e.g. test).")
        parser.add_argument("--dry-run", action="store_true", help="Read and check everything; store nothing.")
        parser.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")
        parser.add_argument("--skipped-ids", type=Path, help="Write the ids of every skipped report to this file.")

    def handle(self, *args, **options) -> None:
        path = Path(options["path"])
        split_csv = Path(options["split_csv"]) if options["split_csv"] else None
        dataset = Dataset.objects.filter(key=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"Dataset {options['dataset']} is not in the database. Run manage.py migrate.")
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = progress_bar(total=total or None, unit="reports", desc="Reading", file=self.stderr._out)
            bar.update(done - bar.n)

        try:
            report = import_reports(
                dataset,
                path,
                split_csv=split_csv,
                split=options["split"],
                dry_run=options["dry_run"],
                progress=progress,
            )
        except ImportRejected as rejected:
            if bar is not None:
                bar.close()
            for problem in rejected.problems:
                self.stderr.write(f"{path.name}: {problem}" if not problem.file else str(problem))
            raise CommandError(f"Nothing was stored: {len(rejected.problems)} problem(s) in {path.name}.") from None
        if bar is not None:
            bar.close()
        lines = report.summary_lines()
        self.stdout.write(self.style.SUCCESS(lines[0]))
        for line in lines[1:]:
            self.stdout.write(line)
        if options["skipped_ids"]:
            with Path(options["skipped_ids"]).open("w", encoding="utf-8") as handle:
                for reason, ids in report.skipped.items():
                    handle.writelines(f"{study_id}\t{reason}\n" for study_id in ids)
            self.stdout.write(f"Skipped ids written to {options['skipped_ids']}.")
