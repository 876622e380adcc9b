"""Mutation testing of the protocol's core, one module at a time (run through bin/mutate).

Each module is mutated by mutmut 3 in a work folder of its own under .mutation/ (symlinks to
the project and a setup.cfg naming that module and the tests that guard it). The verdicts are
kept in the repository (docs/mutation-verdicts/<module>.json), each with the hash of its
function's source, so a run in any clone re-tests only the mutants of functions that changed
or were never tested. Prints the score (killed out of all the module's mutants), the survivors
and the time taken, per module.
"""

import argparse
import contextlib
import fnmatch
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
VERDICTS = ROOT / "docs" / "mutation-verdicts"
# The project's packages: every top-level folder with an apps.py, and config.
APPS = ("config", *sorted(path.parent.name for path in ROOT.glob("*/apps.py")))
ALSO_COPY = ("templates", "static", "docs", "tools", "manage.py")
LINKED = (*APPS, *ALSO_COPY, "tests", "pyproject.toml")

PERMISSIONS = ["tests/config/test_permission_matrix.py", "tests/annotation/test_api_permissions.py"]
ROUTING = [
    "tests/consensus/test_route_example.py",
    "tests/consensus/test_submit_annotation.py",
    "tests/consensus/test_void_annotation.py",
    "tests/consensus/test_submit_adjudication.py",
    "tests/consensus/test_keep_versions_apart.py",
    "tests/consensus/test_rationale_length.py",
    "tests/consensus/test_show_assignment.py",
    "tests/consensus/test_unrouted.py",
    # Not the state machine (test_routing_state_machine.py): a mutant that survives everything
    # else would run it for minutes. The bounded properties stay.
    "tests/consensus/test_routing_properties.py",
    # The undo window: ratings settle, are taken back, and only settled ones are routed.
    "tests/consensus/test_undo_window.py",
    "tests/reading/test_reading_undo.py",
    "tests/annotation/test_undo_blinding.py",
    "tests/consensus/test_eligible_adjudicators.py",
    # Withdrawing a read (by hand; the routing module does the work).
    "tests/consensus/test_manual_assignment.py",
    # The adjudicator's own showing and A/B coin.
    "tests/reading/test_adjudication_page.py",
    # A rating of an item never shown is refused (the web page and the API).
    "tests/reading/test_reading_page.py",
    "tests/reading/test_reader_api.py",
    # Where a routed read goes in its reader's queue (create_routed_assignment).
    "tests/annotation/test_third_read_blinding.py",
    # A rating records the version of the reader guide its reader confirmed.
    "tests/annotation/test_guide.py",
]
RELEASES = [
    "tests/exports/test_build_release.py",
    "tests/exports/test_release_build_steps.py",
    "tests/exports/test_release_task.py",
    "tests/exports/test_release_recovery.py",
    "tests/exports/test_release_versions.py",
    "tests/exports/test_release_retry_delete.py",
    "tests/exports/test_release_api.py",
    "tests/exports/test_release_page.py",
    "tests/exports/test_release_guide_and_practice.py",
    "tests/exports/test_release_snapshot.py",
    "tests/judges/test_release_judges.py",
    # Storing the zip in an object store (store_zip, stored_sha256), over HTTP against moto's server.
    "tests/exports/test_release_s3.py",
]

# Module -> the tests that guard it. mutmut runs, for each mutant, only those of them that
# call the mutated function.
MODULES: dict[str, list[str]] = {
    # The role and object checks of every view.
    # The login redirect says when a session ended (test_login.py).
    "annotation/decorators.py": [*PERMISSIONS, "tests/annotation/test_login.py"],
    "annotation/permissions.py": PERMISSIONS,
    "annotation/roles.py": [
        *PERMISSIONS,
        "tests/annotation/test_roles.py",
        # The token's lookup reads the roles along (role_permissions_held, remember_roles).
        "tests/annotation/test_authentication.py",
        "tests/annotation/test_create_user.py",
        "tests/consensus/test_conflicts.py",
        "tests/judges/test_judge_reading.py",
        # A reading token's request keeps only the reading roles (limit_roles).
        "tests/annotation/test_api_tokens.py",
    ],
    # API tokens: made, revoked (by whom), their last use.
    "annotation/tokens.py": [
        *PERMISSIONS,
        "tests/annotation/test_api_tokens.py",
        "tests/annotation/test_authentication.py",
        "tests/annotation/test_create_user.py",
    ],
    "consensus/conflicts.py": [
        *PERMISSIONS,
        "tests/consensus/test_conflicts.py",
        "tests/consensus/test_conflict_of_interest.py",
    ],
    # Routing, the A/B coin, the rationale rules.
    "consensus/services.py": ROUTING,
    # Queues: automatic and manual assignment, enrolment.
    "consensus/assignment.py": [
        "tests/consensus/test_assign_readers.py",
        "tests/consensus/test_assign_readers_command.py",
        "tests/consensus/test_manual_assignment.py",
        "tests/consensus/test_keep_versions_apart.py",
        "tests/consensus/test_route_example.py",
        "tests/consensus/test_unrouted.py",
        "tests/consensus/test_query_budgets.py",
        "tests/annotation/test_third_read_blinding.py",
        "tests/annotation/test_queue_counters.py",
        "tests/consensus/test_routing_properties.py",
        # The coordinators' API: what assigning answers.
        "tests/consensus/test_api_coordination.py",
    ],
    "annotation/queues.py": [
        "tests/annotation/test_queue_counters.py",
        "tests/consensus/test_assign_readers.py",
        "tests/reading/test_reader_api_next_order.py",
        "tests/consensus/test_routing_properties.py",
    ],
    # What a reader is shown.
    "annotation/reading.py": [
        "tests/annotation/test_blinding.py",
        "tests/annotation/test_third_read_blinding.py",
        "tests/reading/test_reading_page.py",
        "tests/reading/test_reader_api.py",
        "tests/reading/test_reader_api_next_order.py",
        "tests/reading/test_reader_home.py",
        "tests/reading/test_reading_state.py",
        "tests/reading/test_reading_undo.py",
        "tests/annotation/test_undo_blinding.py",
        "tests/consensus/test_undo_window.py",
    ],
    # The release build.
    "exports/tasks.py": [
        "tests/exports/test_release_task.py",
        "tests/exports/test_release_recovery.py",
        # export_release: the folder instead of a zip, its progress bar and report.
        "tests/exports/test_build_release.py",
    ],
    # Requesting, retrying and deleting a build.
    "exports/services.py": RELEASES,
    # The release files.
    "exports/building.py": RELEASES,
    # Builds whose worker died, and the queue's records of their tasks (the results' too).
    # The release pages and API mark lost builds failed as they are read: every release test.
    "exports/recovery.py": [*RELEASES, "tests/analysis/test_results_recovery.py"],
}

# A mutant that timed out is killed too: the tests noticed (mutmut counts it so).
KILLED = ("killed", "timeout")
# What a verdict may be once a mutant ran (mutmut's words). "no tests": no selected test reaches it.
FINAL = (*KILLED, "survived", "no tests")
RESULT_LINE = re.compile(r"^\s+(?P<name>\S+): (?P<status>.+)$")


def work_folder(module: str) -> Path:
    """The module's own folder: symlinks to the project and a setup.cfg for mutmut."""
    folder = WORK / module.removesuffix(".py").replace("/", ".")
    folder.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = folder / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name)
    lines = ["[mutmut]", "source_paths =", *(f"    {app}" for app in APPS)]
    lines += ["only_mutate =", f"    {module}"]
    lines += ["also_copy =", *(f"    {name}" for name in ALSO_COPY)]
    lines += ["pytest_add_cli_args_test_selection =", *(f"    {test}" for test in MODULES[module])]
    # Each forked run copies the migrated template (tests/conftest.py); pytest-django makes none.
    lines += ["pytest_add_cli_args =", "    -p", "    no:cacheprovider", "    --reuse-db"]
    # A mutant that makes a build's monitor thread wait forever uses no CPU: give up on it after
    # four times the tests' usual time rather than mutmut's fifteen.
    lines += ["timeout_multiplier = 4"]
    setup = "\n".join(lines) + "\n"
    cfg = folder / "setup.cfg"
    if not cfg.exists() or cfg.read_text() != setup:
        # mutmut collects the coverage of tests new to the selection and forgets the verdicts of
        # the functions they reach (docs/mutation-verdicts/ keeps them, see recorded_verdicts).
        cfg.write_text(setup)
    return folder


def migrated_template() -> Path:
    """An SQLite database migrated once per bin/mutate run; each test run starts from a copy of it."""
    WORK.mkdir(exist_ok=True)
    # Of this run's own: another bin/mutate may be running beside it.
    template = WORK / f"template-{os.getpid()}.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{template}", "DJANGO_SETTINGS_MODULE": "config.settings_test"}
    for command in (["migrate", "--run-syncdb", "--verbosity", "0"], ["createcachetable"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)  # noqa: S603
    # One file, no write-ahead log beside it: a copy of the file is the whole database.
    with closing(sqlite3.connect(template)) as db:
        db.execute("PRAGMA journal_mode=DELETE")
    return template


def module_mutants(module: str, folder: Path) -> dict[str, str]:
    """Every mutant mutmut makes of the module, with the hash of its function's source (mutmut's
    own names and hashes; a hash changes only when the function's code does)."""
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.utils.format_utils import get_mutant_name, mangled_name_from_mutant_name

    with contextlib.chdir(folder):  # mutmut reads its settings (setup.cfg) from there
        mutated = mutate_file_contents(module, (ROOT / module).read_text())
    hashes = {get_mutant_name(Path(module), name): digest for name, digest in mutated.hash_by_function_name.items()}
    mutants = {}
    for name in mutated.mutant_names:
        full = get_mutant_name(Path(module), name)
        mutants[full] = hashes[mangled_name_from_mutant_name(full)]
    return mutants


def function_of(mutant: str) -> str:
    """consensus.services.x_route_example__mutmut_3 -> x_route_example (mutmut's key for its function)."""
    return mutant.rsplit(".", 1)[-1].split("__mutmut_")[0]


def tested_hashes(folder: Path, module: str) -> dict[str, str]:
    """The hash of each function as mutmut mutated it, from its record in the work folder."""
    meta = folder / "mutants" / f"{module}.meta"
    return json.loads(meta.read_text()).get("hash_by_function_name", {}) if meta.exists() else {}


def found_on(mutants: dict[str, str], found: dict[str, str], tested: dict[str, str]) -> dict[str, str]:
    """The hash to keep with each verdict: for one mutmut found, that of the code it mutated (the
    source may have moved on since the run began: the next run then tests that function again)."""
    return {
        name: tested.get(function_of(name), digest) if name in found else digest for name, digest in mutants.items()
    }


def verdicts_file(module: str) -> Path:
    return VERDICTS / (module.removesuffix(".py").replace("/", ".") + ".json")


def recorded_verdicts(module: str, mutants: dict[str, str]) -> dict[str, str]:
    """The kept verdicts that still hold: their function is unchanged since."""
    path = verdicts_file(module)
    kept = json.loads(path.read_text()) if path.exists() else {}
    return {name: status for name, (status, digest) in kept.items() if mutants.get(name) == digest}


def save_verdicts(module: str, mutants: dict[str, str], statuses: dict[str, str]) -> None:
    path = verdicts_file(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One mutant a line, so that a re-run's changes read well in a diff.
    rows = [
        f"{json.dumps(name)}: {json.dumps([status, mutants[name]])}"
        for name, status in sorted(statuses.items())
        if status in FINAL
    ]
    path.write_text("{\n" + ",\n".join(rows) + "\n}\n")


def to_run(
    mutants: dict[str, str], recorded: dict[str, str], *, survivors: bool, only: list[str], timeouts: bool = False
) -> list[str]:
    """The mutants this run tests: those asked for (all of them, or their survivors or timeouts),
    the survivors or timeouts, or those without a verdict."""
    again = (("survived", "no tests") if survivors else ()) + (("timeout",) if timeouts else ())
    names = list(mutants)
    if only:
        names = [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in only)]
        if not again:
            return names
    if again:
        return [name for name in names if recorded.get(name) in again]
    return [name for name in names if name not in recorded]


def mutate(
    module: str,
    *,
    template: Path | None,
    max_children: int,
    fresh: bool,
    survivors: bool = False,
    timeouts: bool = False,
    only: list[str],
) -> dict:
    """Run mutmut on one module (template None: run nothing, only gather the verdicts and keep them)."""
    folder = work_folder(module)
    if fresh:
        shutil.rmtree(folder / "mutants", ignore_errors=True)
    mutants = module_mutants(module, folder)
    recorded = {} if fresh else recorded_verdicts(module, mutants)
    env = {**os.environ, "DEBUG": "1", "READINGROOM_TEST_DB_TEMPLATE": str(template)}
    env.pop("DATABASE_URL", None)
    started = time.monotonic()
    returncode = 0
    names = to_run(mutants, recorded, survivors=survivors, only=only, timeouts=timeouts) if template is not None else []
    if names:
        # Named mutants only, unless none has a verdict yet (mutmut then runs them all).
        named = [] if len(names) == len(mutants) else names
        returncode = subprocess.run(  # noqa: S603 (no shell; the arguments are this command line's own)
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *named],
            cwd=folder,
            env=env,
            check=False,
        ).returncode
    elapsed = time.monotonic() - started if names else 0.0
    # What mutmut holds in this folder (this run's verdicts, and earlier runs' it has not forgotten).
    found: dict[str, str] = {}
    if (folder / "mutants").exists():
        listed = subprocess.run(
            [sys.executable, "-m", "mutmut", "results", "--all", "true"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for line in listed.stdout.splitlines():
            if (match := RESULT_LINE.match(line)) and match["status"] in FINAL:
                found[match["name"]] = match["status"]
    statuses = {name: found.get(name) or recorded.get(name) or "not checked" for name in mutants}
    save_verdicts(module, found_on(mutants, found, tested_hashes(folder, module)), statuses)
    return {
        "module": module,
        "returncode": returncode,
        "seconds": elapsed,
        "ran": len(names),
        "statuses": statuses,
        "folder": folder,
    }


def report(result: dict) -> None:
    statuses = result["statuses"]
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    # A mutant no selected test reaches ("no tests") is a survivor too: nothing would notice it.
    total = len(statuses)
    killed = sum(n for status, n in counts.items() if status in KILLED)
    score = f"{100 * killed / total:.1f}%" if total else "n/a"
    took = f"; {result['ran']} tested in {result['seconds'] / 60:.1f} min" if result["ran"] else "; none tested now"
    unchecked = f", {counts['not checked']} never tested" if counts.get("not checked") else ""
    print(f"\n== {result['module']}: {killed}/{total} killed ({score}{unchecked}){took}")
    print("   " + ", ".join(f"{status} {n}" for status, n in sorted(counts.items())))
    for name, status in sorted(statuses.items()):
        if status not in KILLED:
            print(f"   {status}: {name}")
    if any(status == "survived" for status in statuses.values()):
        print(f"   see one: (cd {result['folder'].relative_to(ROOT)} && ../../.venv/bin/mutmut show <name>)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all of them, one after another)")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests, and stop")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results of these modules")
    parser.add_argument("--report", action="store_true", help="print the kept results of these modules, run nothing")
    parser.add_argument(
        "--survivors", action="store_true", help="re-test only the kept survivors (after adding tests for them)"
    )
    parser.add_argument(
        "--timeouts",
        action="store_true",
        help="re-test only the kept timeouts (a run beside other work times out mutants that would survive)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="mutate only these functions, e.g. 'consensus.services.x_route_example*' (repeatable; see mutmut's "
        "names); with --survivors or --timeouts, only their survivors or timeouts",
    )
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(module)
            for test in tests:
                print(f"    {test}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not a core module: {', '.join(unknown)}. See --list.")
    modules = args.modules or list(MODULES)
    if args.report:
        for module in modules:
            report(mutate(module, template=None, max_children=1, fresh=False, only=[]))
        return 0
    template = migrated_template()
    try:
        results = [
            mutate(
                module,
                template=template,
                max_children=args.max_children,
                fresh=args.fresh,
                survivors=args.survivors,
                timeouts=args.timeouts,
                only=args.only,
            )
            for module in modules
        ]
    finally:
        for path in WORK.glob(f"{template.name}*"):
            path.unlink()
    for result in results:
        report(result)
    failed = [result["module"] for result in results if result["returncode"]]
    if failed:
        print(f"\nmutmut did not finish on: {', '.join(failed)} (see its output above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
