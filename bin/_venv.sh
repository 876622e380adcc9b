# Sourced by bin/demo, bin/test and bin/lock: make sure .venv exists with the locked requirements.
#
# READINGROOM_REQUIREMENTS=app installs requirements.txt (what the application needs to run: the demo,
# production); dev (the default) installs requirements-dev.txt (that and the test and tooling stack).
# Both files pin every package with its SHA-256, and the installer refuses anything that does not
# match (--require-hashes). Installs with uv when it can (pinned and hash-checked itself, in
# requirements-uv.txt), else with pip; READINGROOM_INSTALLER=pip forces pip. Reinstalls only when the
# lock file changed since the last install.

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

_readingroom_install() {
  local lock=$1 stamp=$2 wanted=$3 started=$SECONDS
  echo "Installing $lock into .venv (the first time takes a few minutes: packages are downloaded)..."
  if [ "${READINGROOM_INSTALLER:-uv}" != pip ] &&
    { [ -x .venv/bin/uv ] || .venv/bin/python -m pip install --quiet --disable-pip-version-check \
      --require-hashes --no-deps -r requirements-uv.txt; }; then
    # --compile-bytecode, as pip does by default: with PYTHONDONTWRITEBYTECODE set (as on some
    # machines) nothing would ever be compiled, and every process would compile Django anew.
    .venv/bin/uv pip install --quiet --python .venv/bin/python --require-hashes --compile-bytecode -r "$lock"
  else
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r "$lock"
  fi
  echo "$wanted" > "$stamp"
  echo "Installed $lock in $((SECONDS - started)) s."
}

if [ ! -x .venv/bin/python ]; then
  python=$(find_python)
  echo "Creating .venv with $("$python" --version)..."
  "$python" -m venv .venv
fi
case "${READINGROOM_REQUIREMENTS:-dev}" in
  app) lock=requirements.txt ;;
  dev) lock=requirements-dev.txt ;;
  *) echo "READINGROOM_REQUIREMENTS is app or dev, not '${READINGROOM_REQUIREMENTS}'." >&2; return 2 ;;
esac
wanted=$(sha256sum "$lock" | cut -d' ' -f1)
# requirements-dev.txt holds requirements.txt's packages at the same versions: once it is installed,
# so is the application's lock as it stood then.
if [ "$(cat ".venv/.$lock.sha256" 2>/dev/null)" != "$wanted" ]; then
  _readingroom_install "$lock" ".venv/.$lock.sha256" "$wanted"
  if [ "$lock" = requirements-dev.txt ]; then
    sha256sum requirements.txt | cut -d' ' -f1 > .venv/.requirements.txt.sha256
  fi
fi
