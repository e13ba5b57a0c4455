#!/usr/bin/env bash
# Set up (idempotent) and run DeBL's whole test suite against the real local stack, which the
# tests start themselves (and leave running: `debl stack down` stops it).
#
# The suite runs in two parts (docs/ARCHITECTURE.md, "The test suite"): every test but the
# `exclusive` ones over DEBL_TEST_WORKERS processes at once (pytest-xdist; each in a namespace of
# its own on the one stack, a module's tests on one process), then the `exclusive` ones alone
# (they stop, freeze or restart a service of the stack). Both print their slowest tests.
# With arguments, pytest runs them as given instead (one process): e.g. `-m "not stack"` (the
# quick tier: no service), a file, or `-k NAME`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider --durations=25)
if [ $# -gt 0 ]; then
  exec "${pytest[@]}" "$@"
fi
status=0
# --no-loadscope-reorder: the groups in the order tests/conftest.py gives (the long ones first),
# not pytest-xdist's largest first, which left the one-test groups of the kill campaign for last.
"${pytest[@]}" -n "${DEBL_TEST_WORKERS:-3}" --dist loadgroup --no-loadscope-reorder \
  -m "not exclusive" || status=$?
"${pytest[@]}" -m exclusive || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
exit "$status"
