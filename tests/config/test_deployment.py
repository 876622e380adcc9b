"""The deployment files of deploy/ and the Procfile: they name commands that exist and settings that load."""

import configparser
import os
import shlex
import subprocess
import sys
from pathlib import Path

from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]


def test_gunicorns_configuration_loads_with_the_application():
    env = {**os.environ, "DEBUG": "1", "GUNICORN_WORKERS": "3", "GUNICORN_TIMEOUT": "45"}
    gunicorn = Path(sys.executable).with_name("gunicorn")
    printed = subprocess.run(  # noqa: S603
        [gunicorn, "--print-config", "-c", "deploy/gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    lines = (line.partition(" = ") for line in printed.splitlines())
    settings = {key.strip(): value.strip() for key, _, value in lines}
    assert (settings["workers"], settings["timeout"], settings["worker_class"]) == ("3", "45", "sync")
    assert settings["preload_app"] == "False"  # each worker opens its own database pool
    assert int(settings["max_requests"]) > 0


def _manage_commands(commands: list[list[str]]) -> set[str]:
    return {words[words.index("manage.py") + 1] for words in commands if "manage.py" in words}


def test_the_procfile_and_the_units_run_commands_that_exist():
    procfile = [shlex.split(line.split(":", 1)[1]) for line in (ROOT / "Procfile").read_text().splitlines() if line]
    units = []
    for unit in ("readingroom-web.service", "readingroom-worker.service"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read(ROOT / "deploy" / unit)
        units.append(shlex.split(parser["Service"]["ExecStart"]))
        assert parser["Service"]["EnvironmentFile"] == "/etc/readingroom/env"

    assert _manage_commands(procfile + units) <= set(get_commands())
    assert {"db_worker", "migrate"} <= _manage_commands(procfile)
    for words in procfile + units:
        if "-c" in words:
            assert (ROOT / words[words.index("-c") + 1]).is_file()


def test_the_example_environment_names_only_settings_the_application_reads():
    names = {
        line.split("=", 1)[0]
        for line in (ROOT / "deploy" / "env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    read = (ROOT / "config" / "settings.py").read_text() + (ROOT / "deploy" / "gunicorn.conf.py").read_text()
    assert names and all(f'"{name}"' in read for name in names)
