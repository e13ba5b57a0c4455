#!/usr/bin/env bash
# Set up (idempotent) and run DeBL's whole test suite against the real local stack, which the
# tests start themselves (and leave running: `debl stack down` stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
