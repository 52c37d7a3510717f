#!/usr/bin/env bash
# Build the JupyterLab extension from source (labextension/) and make it visible to the venv's
# JupyterLab. Needs Node.js and npm; packages come from the npm registry (package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."
# install when missing, and again when the lock file changed since (new packages)
if [ ! -d labextension/node_modules ] \
   || [ labextension/package-lock.json -nt labextension/node_modules/.package-lock.json ]; then
  # (a registry mirror without other platforms' optional packages fails `npm ci`'s check: install from the lock)
  (cd labextension && { npm ci --no-audit --no-fund || npm install --no-audit --no-fund --no-save; })
fi
(cd labextension && npm run build:prod)
jupyter labextension develop --overwrite . >/dev/null
