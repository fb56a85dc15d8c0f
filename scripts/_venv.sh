# Sourced by scripts/demo and scripts/test: create or reuse .venv and install the project into it.
# Re-installs only when pyproject.toml changed since the last install.
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
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -f $stamp || "$(cat "$stamp")" != "$want" ]]; then
  echo "Installing specrun and its dependencies into .venv (log: .venv/install.log) ..." >&2
  if ! { .venv/bin/python -m pip install --upgrade pip \
         && .venv/bin/python -m pip install -e '.[test]'; } >.venv/install.log 2>&1; then
    tail -n 30 .venv/install.log >&2
    echo "Installing specrun's dependencies failed; the full log is in .venv/install.log." >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
export PATH="$root/.venv/bin:$PATH"
# The project's own modules as bytecode: an editable install leaves them as source, and
# where PYTHONDONTWRITEBYTECODE is set (many containers, this project's CI) every specrun
# process would compile them again at each start: a service's start paid 0.3 s of CPU for it
# and its idle memory 1.3 MB of the compiler's leftovers (docs/benchmarks.md). Only what
# changed since the last run is compiled; the demo's sample project is data, not ours.
.venv/bin/python -m compileall -q -j 0 -x 'sample_project' coordinator worker protocol overlay \
  >/dev/null 2>&1 || true
source "$(dirname "${BASH_SOURCE[0]}")/_system_deps.sh"
