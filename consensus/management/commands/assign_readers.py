from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Study, Task
from annotation.progress import progress_bar
from consensus.assignment import QueueRefused, assign_readers


class Command(BaseCommand):
    help = (
        "Assign automatically: two distinct readers for every example still waiting, load balanced, "
        "within each reader's cap (the same as the coordinator's Assign button)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="Study slug.")
        parser.add_argument(
            "--task", choices=Task.values, help="Assign only this task's examples (default: both tasks)."
        )
        parser.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")

    def handle(self, *args, **options) -> None:
        try:
            study = Study.objects.get(slug=options["study"])
        except Study.DoesNotExist:
            raise CommandError(f"No study '{options['study']}'.") from None
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = progress_bar(total=total, unit="examples", desc="Assigning", file=self.stderr._out)
            bar.update(done - bar.n)

        try:
            # Run from the shell: no signed-in coordinator, so the audit rows name no actor.
            report = assign_readers(
                study, actor=None, tasks=[options["task"]] if options["task"] else None, progress=progress
            )
        except QueueRefused as refused:
            raise CommandError(str(refused)) from None
        finally:
            if bar is not None:
                bar.close()
        self.stdout.write(report.readers)
        for note in report.notes:
            self.stderr.write(self.style.WARNING(note))
        self.stdout.write(self.style.SUCCESS(report.summary))
