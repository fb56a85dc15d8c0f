# Sourced by scripts/_venv.sh: what a person sees while the first run installs specrun.
#
# _specrun_step LOG WHAT COMMAND...: runs COMMAND with its output (pip's) going to LOG, and
# shows its progress on stderr. On a terminal: one line, redrawn every second even while
# the command is silent (pip says nothing for ten seconds while it installs), with the
# seconds since the setup began and what pip is at (the package it collects, how many it
# installs). Elsewhere (a CI log, a pipe): one line when each step begins, nothing else.
# COMMAND's exit status is returned.
#
# pip writes to a pipe in blocks unless its Python is unbuffered: without PYTHONUNBUFFERED
# its lines arrived all at once at the end, and the line shown stood still for 20 s.

_specrun_setup_started=${_specrun_setup_started:-$SECONDS}

# The terminal's width, for a status line that never wraps (a wrapped line cannot be
# redrawn in place).
_specrun_columns() {
  local size
  if size=$(stty size 2>/dev/null </dev/tty) && [[ $size == *" "* ]]; then
    echo "${size#* }"
  else
    echo 80
  fi
}

_specrun_step() {
  local log=$1 what=$2
  shift 2
  local tty=0 width=80
  if [[ -t 2 ]]; then
    tty=1
    width=$(_specrun_columns)
  else
    printf '  %3d s  %s\n' $((SECONDS - _specrun_setup_started)) "$what" >&2
  fi
  local -  # set +e for this function only: the command's failure is returned, not fatal here
  set +e
  PYTHONUNBUFFERED=1 "$@" 2>&1 | _specrun_follow "$log" "$what" "$tty" "$width"
  return "${PIPESTATUS[0]}"
}

# _specrun_follow LOG WHAT TTY WIDTH: the output on stdin into LOG, and the status line.
_specrun_follow() {
  local log=$1 what=$2 tty=$3 width=$4
  local status=$what line partial="" collected=0 got name names rc shown
  while true; do
    got=0
    if IFS= read -r -t 1 line; then
      got=1
    else
      rc=$?
      if ((rc <= 128)); then  # the end of the output (a last line without a newline too)
        [[ -n $partial$line ]] && printf '%s\n' "$partial$line" >>"$log"
        break
      fi
      partial+=$line  # a second went by in the middle of a line: keep what came of it
    fi
    if ((got)); then
      line=$partial$line
      partial=""
      printf '%s\n' "$line" >>"$log"
      case $line in
        Collecting* | Processing*)  # a requirement found: "Collecting rich>=13 (from ...)"
          collected=$((collected + 1))
          name=${line#* }
          name=${name%% (*}
          [[ $name == */*.whl ]] && name=${name##*/} && name=${name%%-*}  # a wheel file
          status="$what: $collected found, the last $name" ;;
        "Installing collected packages:"*)
          names=${line#*: }
          names=${names//[^,]/}
          status="$what: writing $((${#names} + 1)) package(s) into place (pip is quiet meanwhile)" ;;
        *": started")  # "  Installing build dependencies: started"
          name=${line%: started}
          status="$what: ${name#"${name%%[! ]*}"}" ;;
      esac
    fi
    if ((tty)); then
      shown=$(printf '  %3d s  %s' $((SECONDS - _specrun_setup_started)) "$status")
      printf '\r\033[K%s' "${shown:0:width-1}" >&2
    fi
  done
  if ((tty)); then printf '\r\033[K' >&2; fi
  return 0
}
