from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study, Task
from annotation.progress import progress_bar
from exports.building import ReleaseRefused, ReleaseSummary
from exports.models import ReleaseStatus
from exports.services import request_release
from exports.tasks import run_release_build


class Command(BaseCommand):
    help = (
        "Build a study's PhysioNet release folder (task1/task2 CSVs, README.md, LICENSE.txt, SHA256SUMS.txt) "
        "in this process, into --out. It is listed with the builds of the releases page, and takes its version."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs) -> CommandParser:
        # Our --version (the release's) replaces Django's base --version, which would clash with it.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument("--out", required=True, type=Path, help="A new (or empty) folder for the release.")
        parser.add_argument("--datasets", nargs="+", help="Release only these datasets (e.g. mimic-cxr).")
        parser.add_argument("--version", dest="release_version", default="1.0.0", help="Digits and dots.")
        parser.add_argument(
            "--include-unfinished", action="store_true", help="Include examples without a consensus (empty rating)."
        )
        parser.add_argument(
            "--include-guide", action="store_true", help="Add the study's reader guide (newest version) as guide.md."
        )
        parser.add_argument(
            "--include-judges",
            action="store_true",
            help="Add judges/task1_judges.csv and judges/task2_judges.csv: the automated judges' ratings.",
        )
        parser.add_argument("--license", type=Path, help="Licence text file (default: the study's licence text).")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, **options) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist:
            raise CommandError(f"No study '{options['study']}'.") from None
        if options["license"]:
            if not options["license"].is_file():
                raise CommandError(f"{options['license']}: no such licence file.")
            try:
                # Bytes, then decode: read_text() would turn the file's CRLFs into LFs.
                license_text = options["license"].read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                raise CommandError(f"{options['license']}: not UTF-8 text. Save the licence as UTF-8.") from None
        else:
            license_text = study.license_text
        out = options["out"]
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            # Checked before the version is taken; build_release checks it again.
            raise CommandError(f"{out} is not empty. Give a new folder for the release.")
        try:
            release = request_release(
                study,
                user=None,
                version=options["release_version"],
                datasets=options["datasets"],
                include_unfinished=options["include_unfinished"],
                include_guide=options["include_guide"],
                include_judges=options["include_judges"],
                license_text=license_text,
                enqueue=False,
            )
        except ReleaseRefused as refused:
            raise CommandError(str(refused)) from None

        bar = None
        summaries: list[ReleaseSummary] = []

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = progress_bar(total=total, unit="rows", desc="Building", file=self.stderr._out)
            bar.update(done - bar.n)

        try:
            run_release_build(
                str(release.public_id), folder_only=out, on_progress=progress, on_summary=summaries.append
            )
        finally:
            if bar is not None:
                bar.close()
        release.refresh_from_db()
        if release.status != ReleaseStatus.DONE:
            raise CommandError(f"Release {release.version} failed: {release.error}")
        [summary] = summaries
        for name, rows in summary.row_counts.items():
            self.stdout.write(f"{name}: {rows} rows")
        for task in (Task.REALISM, Task.EQUIVALENCE):
            left_out = summary.counts[task].left_out
            if left_out:
                self.stdout.write(f"{Task(task).label}: {left_out} examples without a consensus left out.")
        self.stdout.write(self.style.SUCCESS(f"Release {summary.version} written to {out}."))
