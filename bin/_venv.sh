# Sourced by bin/demo and bin/test: make sure .venv exists with the pinned requirements.
# Reinstalls only when requirements.txt changed since the last install.

find_python() {
  for candidate in "${PYTHON:-}" python3.12 python3.13 python3.14 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "ReadingRoom needs Python 3.12 or newer (see .python-version); none was found on PATH." >&2
  return 1
}

if [ ! -x .venv/bin/python ]; then
  python=$(find_python)
  echo "Creating .venv with $("$python" --version)..."
  "$python" -m venv .venv
fi
stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  echo "Installing requirements into .venv..."
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$wanted" > "$stamp"
fi
