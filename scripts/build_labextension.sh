#!/usr/bin/env bash
# Build the JupyterLab extension from source (labextension/) and make it visible to the venv's
# JupyterLab. Needs Node.js and npm; packages come from the npm registry (package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d labextension/node_modules ]; then
  (cd labextension && npm ci --no-audit --no-fund)
fi
(cd labextension && npm run build:prod)
jupyter labextension develop --overwrite . >/dev/null
