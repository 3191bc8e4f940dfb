#!/usr/bin/env bash
# A starting point for a bash tool. Params arrive as env INPUT_<NAME> (and as JSON on
# stdin), a line written to fd 3 is a progress update, stdout is the result text and a
# non-zero exit status means isError. A cancelled run gets SIGTERM.
set -uo pipefail

MESSAGE="${INPUT_MESSAGE:-}"
STEPS="${INPUT_STEPS:-3}"
STEP_SECONDS=0.5

# Progress goes to fd 3 only when the runner opened it (running by hand works too).
if { true >&3; } 2>/dev/null; then
  progress() { printf '%s\n' "$*" >&3; }
else
  progress() { :; }
fi

fail() {
  printf 'Error: %s\n' "$*"
  exit 1
}

# Cancellation: stop the current sleep and exit non-zero.
SLEEP_PID=""
on_cancel() {
  [[ -n "$SLEEP_PID" ]] && kill "$SLEEP_PID" 2>/dev/null
  printf 'cancelled\n'
  exit 143
}
trap on_cancel TERM INT

[[ -n "${MESSAGE// /}" ]] || fail "message is required"
if ! [[ "$STEPS" =~ ^[0-9]+$ ]] || ((STEPS < 1 || STEPS > 10)); then
  fail "steps must be an integer from 1 to 10"
fi

for ((step = 1; step <= STEPS; step++)); do
  # In the background, so the TERM trap runs at once instead of after the sleep.
  sleep "$STEP_SECONDS" &
  SLEEP_PID=$!
  wait "$SLEEP_PID"
  SLEEP_PID=""
  progress "step $step of $STEPS"
done

printf '%s (after %s steps)\n' "$MESSAGE" "$STEPS"
