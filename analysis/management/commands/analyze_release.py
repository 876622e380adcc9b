from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analysis.release_folder import NotARelease, read_release
from analysis.report import write_results
from analysis.results import AnalysisInputError, analyze


class Command(BaseCommand):
    help = (
        "Analyse a release folder (ours or the published MIMIC-CXR-Ext-ReRef files): tables (CSV), figures "
        "(SVG, PNG), results.md and results.json. Reads only the files; needs no database rows."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The release folder (the one holding task1/ and task2/).")
        parser.add_argument("--out", required=True, type=Path, help="Folder for the results (created if needed).")
        parser.add_argument("--dataset", help="Only this dataset (e.g. mimic-cxr).")
        parser.add_argument("--task", choices=["task1", "task2"], help="Only this task.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap intervals (default 0).")

    def handle(self, *args, **options) -> None:
        out: Path = options["out"]
        if out.exists() and not out.is_dir():
            raise CommandError(f"{out}: exists and is not a folder. Give a folder for the results.")
        try:
            frames = read_release(options["path"], text=False)
            results = analyze(frames, seed=options["seed"], dataset=options["dataset"], task=options["task"])
        except (NotARelease, AnalysisInputError) as error:
            raise CommandError(str(error)) from None
        write_results(results, out)
        counts = ", ".join(
            f"{task}: {values['examples']} examples" for task, values in results.document["counts"].items()
        )
        self.stdout.write(f"Wrote {out}/results.md, results.json, tables/ and figures/ ({counts}).")
