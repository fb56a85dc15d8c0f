# Sourced by scripts/demo and scripts/test: create or reuse .venv and install the project into it.
# Re-installs only when pyproject.toml changed since the last install, or when the caller needs
# more than was installed: scripts/test sets SPECRUN_EXTRAS=test (pytest, mypy, ruff, playwright,
# and the system tools the tests use); the demo installs only what it runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
  echo "specrun needs Python 3.11 or newer on PATH (python3 was not found)." >&2
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "specrun needs Python 3.11 or newer; $("$py" --version 2>&1) was found." >&2
  exit 1
fi
source "$root/scripts/_progress.sh"
_specrun_failed() {  # what failed: the end of the log, and where the rest is
  tail -n 30 .venv/install.log >&2
  echo "$1 failed; the full log is in .venv/install.log." >&2
  exit 1
}
stamp=.venv/.specrun-installed
extras="${SPECRUN_EXTRAS:-}"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
# the stamp is "<hash of pyproject.toml> [test]": an install with the test extra serves the demo
if [[ ! -x .venv/bin/python || "${have%% *}" != "$want" \
      || ( -n $extras && "$have" != "$want $extras" ) ]]; then
  what="specrun and its dependencies"
  [[ -n $extras ]] && what="specrun, its dependencies and its $extras tools"
  mkdir -p .venv
  : >.venv/install.log
  if [[ ! -x .venv/bin/python ]]; then
    echo "First run: installing $what into .venv (about a minute)" >&2
    _specrun_step .venv/install.log "creating .venv" "$py" -m venv .venv \
      || _specrun_failed "Creating .venv"
  else
    echo "Installing $what into .venv" >&2
  fi
  target=.
  [[ -n $extras ]] && target=".[$extras]"
  _specrun_step .venv/install.log "updating pip" .venv/bin/python -m pip install --upgrade pip \
    || _specrun_failed "Updating pip in .venv"
  _specrun_step .venv/install.log "dependencies" .venv/bin/python -m pip install -e "$target" \
    || _specrun_failed "Installing specrun's dependencies"
  echo "  Installed in $((SECONDS - _specrun_setup_started)) s (log: .venv/install.log)." >&2
  echo "$want${extras:+ $extras}" > "$stamp"
fi
unset -f _specrun_failed _specrun_step _specrun_follow _specrun_columns
unset -v _specrun_setup_started
export PATH="$root/.venv/bin:$PATH"
# The project's own modules as bytecode: an editable install leaves them as source, and
# where PYTHONDONTWRITEBYTECODE is set (many containers, this project's CI) every specrun
# process would compile them again at each start: a service's start paid 0.3 s of CPU for it
# and its idle memory 1.3 MB of the compiler's leftovers (docs/benchmarks.md). Only what
# changed since the last run is compiled; the demo's sample project is data, not ours.
.venv/bin/python -m compileall -q -j 0 -x 'sample_project' coordinator worker protocol overlay \
  >/dev/null 2>&1 || true
if [[ -n $extras ]]; then  # the system tools only the tests use (strace, Chromium)
  source "$(dirname "${BASH_SOURCE[0]}")/_system_deps.sh"
fi
