# Sourced by scripts/_venv.sh (so by scripts/test and scripts/demo): system tools the test suite
# uses that do not come from PyPI. Idempotent; installs only what is missing, only as root.
# - strace: scripts/fuzz_shell.py runs read-only-classified commands under it (issue 13).
# - chromium: the web view's browser tests drive Debian's headless Chromium with Playwright
#   (never `playwright install`: the system browser is the one tested).
# When one cannot be installed, the tests that need it skip with the reason instead of failing.
_specrun_install() {  # command package what-for
  local cmd=$1 pkg=$2 why=$3
  command -v "$cmd" >/dev/null 2>&1 && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "Installing $pkg (for $why) ..." >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1 \
        || echo "Could not install $pkg; the tests that need it ($why) will be skipped." >&2
    fi
  else
    echo "$pkg is missing (not root or no apt-get); the tests that need it ($why) will be skipped." >&2
  fi
}
_specrun_install strace strace "scripts/fuzz_shell.py"
_specrun_install chromium chromium "the web view's browser tests"
unset -f _specrun_install
