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
if [[ ! -x .venv/bin/python ]]; then
  "$py" -m venv .venv
fi
stamp=.venv/.specrun-installed
extras="${SPECRUN_EXTRAS:-}"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
# the stamp is "<hash of pyproject.toml> [test]": an install with the test extra serves the demo
if [[ "${have%% *}" != "$want" || ( -n $extras && "$have" != "$want $extras" ) ]]; then
  what="specrun and its dependencies"
  [[ -n $extras ]] && what="specrun, its dependencies and its $extras tools"
  echo "Installing $what into .venv (log: .venv/install.log) ..." >&2
  : >.venv/install.log
  # pip's lines go to the log; a terminal sees which package it is at and for how long
  _specrun_progress() {
    local line started=$SECONDS
    while IFS= read -r line; do
      printf '%s\n' "$line" >>.venv/install.log
      if [[ -t 2 ]]; then
        case $line in
          Collecting*|Downloading*|Building*|Installing*)
            printf '\r\033[K  %3d s  %s' $((SECONDS - started)) "${line:0:66}" >&2 ;;
        esac
      fi
    done
    if [[ -t 2 ]]; then printf '\r\033[K' >&2; fi
  }
  target=.
  [[ -n $extras ]] && target=".[$extras]"
  if ! { .venv/bin/python -m pip install --upgrade pip \
         && .venv/bin/python -m pip install -e "$target"; } 2>&1 | _specrun_progress; then
    tail -n 30 .venv/install.log >&2
    echo "Installing specrun's dependencies failed; the full log is in .venv/install.log." >&2
    exit 1
  fi
  unset -f _specrun_progress
  echo "$want${extras:+ $extras}" > "$stamp"
fi
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
