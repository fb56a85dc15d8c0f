# Sourced by scripts/_venv.sh (so by scripts/test and scripts/demo): system tools the test suite
# uses that do not come from PyPI. Idempotent; installs only what is missing, only as root.
# strace: scripts/fuzz_shell.py runs read-only-classified commands under it (issue 13). When it
# cannot be installed, tests/test_fuzz_shell.py skips with the reason instead of failing.
if ! command -v strace >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing strace (for scripts/fuzz_shell.py) ..." >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q strace >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q strace >/dev/null 2>&1 \
        || echo "Could not install strace; the shell fuzz test will be skipped." >&2
    fi
  else
    echo "strace is missing (not root or no apt-get); the shell fuzz test will be skipped." >&2
  fi
fi
