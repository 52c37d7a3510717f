#!/usr/bin/env bash
# Set up (if needed) and run every test: the Python suite, real-kernel tests, the tutorial notebooks
# (nbval), the extension's unit tests and its browser test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --browser
export PATH="$PWD/.venv/bin:$PATH"
# two workers: most of the suite waits on kernels, servers and browsers; a file stays on one worker
exec pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 "$@"
