"""Analysis commands end their process without the interpreter's teardown (analysis.management.exit):
only after a successful run from the command line, with the exit handlers run and the output flushed;
an error exits as any command's does, and call_command returns."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from analysis.management.exit import ExitWhenDone

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, sys
from analysis.management.exit import ExitWhenDone

class Command:
    def run_from_argv(self, argv):
        print("the command's output", end="")  # no newline: still in the buffer
        if argv[-1] == "fail":
            sys.exit(3)

class Fast(ExitWhenDone, Command):
    pass

atexit.register(lambda: open(sys.argv[1], "w").write("ran at exit"))
Fast().run_from_argv(["manage.py", "command", sys.argv[2]])
print("after the command")
"""


def _run(tmp_path: Path, argument: str) -> tuple[subprocess.CompletedProcess, str]:
    marker = tmp_path / "marker"
    done = subprocess.run(  # noqa: S603 (this interpreter, our own script)
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(marker), argument],
        cwd=ROOT,
        env={key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"},  # a pipe is buffered
        capture_output=True,
        text=True,
        check=False,
    )
    return done, marker.read_text() if marker.exists() else ""


def test_a_command_done_ends_its_process_at_once_with_its_output_and_exit_handlers(tmp_path):
    done, marker = _run(tmp_path, "ok")

    assert (done.returncode, done.stdout, marker) == (0, "the command's output", "ran at exit")


def test_a_command_that_fails_exits_as_usual(tmp_path):
    done, marker = _run(tmp_path, "fail")

    assert (done.returncode, done.stdout, marker) == (3, "the command's output", "ran at exit")


def test_the_analysis_commands_end_this_way_from_the_command_line_only():
    from analysis.management.commands import analyze_release, compute_results

    for module in (analyze_release, compute_results):
        assert issubclass(module.Command, ExitWhenDone)
        assert "run_from_argv" not in vars(module.Command)  # call_command (execute) returns as usual
