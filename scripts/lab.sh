#!/usr/bin/env bash
# Set up (if needed) and open JupyterLab on the quickstart notebook. Offline by default: set
# OPENAI_API_KEY (and OPENAI_BASE_URL for other endpoints) to use a real model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
root_flag=()
[ "$(id -u)" = 0 ] && root_flag=(--allow-root)
exec .venv/bin/jupyter lab "${root_flag[@]}" notebooks/quickstart.ipynb "$@"
