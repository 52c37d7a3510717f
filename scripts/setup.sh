#!/usr/bin/env bash
# Set up a development environment from a clean clone: a venv with the package (editable, with test
# extras), the JupyterLab extension built from source, and — with --browser — Debian's chromium for the
# extension's end-to-end test. Safe to run again; it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

if [ "$want_browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (Debian package) for the browser tests"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi

if ! command -v dot >/dev/null; then
  echo "== installing graphviz (Debian package): dot lays out the trace graph"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq graphviz >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$python" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi

echo "== installing agio-notebook (editable) with test extras"
# (pip's notes about missing local package mirrors are noise here)
.venv/bin/pip install -q -e '.[test]' 2> >(grep -v "^WARNING: Location 'file:" >&2)

if [ -x scripts/build_labextension.sh ]; then
  echo "== building the JupyterLab extension"
  PATH="$PWD/.venv/bin:$PATH" scripts/build_labextension.sh
fi
