#!/usr/bin/env bash
# Set up (only what changed, see setup.sh) and open JupyterLab on the quickstart notebook, with
# notebooks/ as JupyterLab's root. Offline by default: set OPENAI_API_KEY (and OPENAI_BASE_URL for
# other endpoints) to use a real model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --lab
root_flag=()
[ "$(id -u)" = 0 ] && root_flag=(--allow-root)
cd notebooks
exec ../.venv/bin/jupyter lab "${root_flag[@]}" quickstart.ipynb "$@"
