#!/usr/bin/env bash
# Run the real-kernel tests once more on ipykernel 6 (the main suite runs on ipykernel 7), in a venv
# of their own so the main one is untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${IPYKERNEL6_VENV:-.venv-ipykernel6}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q -e '.[test]' 'ipykernel>=6.29,<7' 2> >(grep -v "^WARNING: Location 'file:" >&2)
"$venv/bin/python" -c "import ipykernel; print('ipykernel', ipykernel.__version__)"
exec "$venv/bin/pytest" -p no:cacheprovider tests/test_notebook_kernel.py tests/test_notebook_approval.py \
  tests/test_notebook_stop.py tests/test_compact_frames.py \
  tests/test_notebook_saved.py "$@"
