#!/usr/bin/env bash
# Set up a development environment from a clean clone: Debian's bubblewrap and graphviz, a venv with the
# package (editable, with test extras), the JupyterLab extension built from source, and — with --browser —
# what only the tests need (chromium, postgresql, JupyterHub's configurable-http-proxy from npm, the LiteLLM
# proxy and an OTLP receiver in venvs of their own); --lab leaves out the test tools. Safe to run again; it only redoes a step whose inputs changed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
usage: scripts/setup.sh [--lab | --browser | --litellm]

Set up this clone: Debian's bubblewrap and graphviz, .venv with agio-notebook (editable) and the
JupyterLab extension built from labextension/. Safe to run again: a step runs only when its inputs
changed.

  (no option)  the package with the test tools, Parquet export and Ray
  --lab        what scripts/lab.sh needs: the tutorials' extras and the local embedding model
  --browser    everything the tests need (scripts/test.sh): chromium, PostgreSQL, the graders, and
               LiteLLM's proxy and an OTLP receiver in venvs of their own
  --litellm    only LiteLLM's proxy (.venv-litellm), for scripts/local_llm.sh
  -h, --help   this text
USAGE
}

want_browser=0
for_lab=0
only_litellm=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    --lab) for_lab=1 ;;  # only what scripts/lab.sh needs: no test-only services
    --litellm) only_litellm=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option $arg (see scripts/setup.sh --help)" >&2; exit 2 ;;
  esac
done

python=${PYTHON:-python3}
install_litellm() {  # LiteLLM's proxy in a venv of its own: its pins (openai<3 among them) stay out of .venv
  if [ ! -x .venv-litellm/bin/litellm ]; then
    echo "== installing the LiteLLM proxy into .venv-litellm"
    "$python" -m venv .venv-litellm
    .venv-litellm/bin/pip install -q -r tests/requirements-litellm.txt 2> >(grep -v "^WARNING: Location 'file:" >&2)
  fi
}
if [ "$only_litellm" = 1 ]; then
  install_litellm
  exit 0
fi

# Debian packages: the sandbox (bubblewrap) and graph layout (graphviz's dot) for everyone; with
# --browser also what only the tests need (chromium for the browser tests, postgresql for the store tests).
# One `apt-get update` and one install, only for what is missing.
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
if [ "$want_browser" = 1 ]; then
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$python" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi

# Each step runs only when its inputs changed since it last succeeded (a hash kept in .venv), so a
# second run with nothing changed takes about a second. AGIO_SETUP_FORCE=1 redoes everything.
stamps=.venv/.agio-setup
mkdir -p "$stamps"
up_to_date() {  # up_to_date NAME HASH: was step NAME last done with these inputs?
  [ "${AGIO_SETUP_FORCE:-0}" != 1 ] && [ "$(cat "$stamps/$1" 2>/dev/null)" = "$2" ]
}

# --lab installs what the tutorials need (and the local embedding model for memory); otherwise the test
# tools, Parquet export and Ray too (a superset:
# lab accepts it)
# (--browser, as scripts/test.sh asks, adds the graders the course exports to: nbgrader and otter-grader)
extras=test,parquet,ray,embeddings
[ "$want_browser" = 1 ] && extras=test,parquet,ray,embeddings,graders
[ "$for_lab" = 1 ] && extras=tutorials,embeddings
python_inputs=$( (cat pyproject.toml; .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)
if up_to_date python "$python_inputs test,parquet,ray,embeddings,graders" \
   || { [ "$want_browser" = 0 ] && up_to_date python "$python_inputs test,parquet,ray,embeddings"; } \
   || up_to_date python "$python_inputs $extras"; then
  echo "== agio-notebook already installed (pyproject.toml unchanged)"
else
  echo "== installing agio-notebook (editable) with the extras $extras"
  # (pip's notes about missing local package mirrors are noise here)
  .venv/bin/pip install -q -e ".[$extras]" 2> >(grep -v "^WARNING: Location 'file:" >&2)
  echo "$python_inputs $extras" > "$stamps/python"
fi

# LiteLLM's proxy (a real OpenAI-compatible server for the provider tests) in a venv of its own: its
# pins (openai<3 among them) must not downgrade the project's environment. Only for the full test run
# (--browser, as scripts/test.sh asks), not for scripts/lab.sh.
if [ "$want_browser" = 1 ]; then
  install_litellm  # the provider tests' real OpenAI-compatible server
fi

# JupyterHub's proxy (configurable-http-proxy, from npm) for the classroom's tests and scripts/classroom.sh,
# in a folder of its own beside the venv (no global npm install); jupyterhub itself comes with the test extra
if [ "$want_browser" = 1 ] && [ ! -x .venv/chp/node_modules/.bin/configurable-http-proxy ]; then
  echo "== installing configurable-http-proxy into .venv/chp (JupyterHub's proxy)"
  mkdir -p .venv/chp
  npm install --prefix .venv/chp --no-audit --no-fund --silent configurable-http-proxy@5
fi

# A real OTLP receiver for the OpenTelemetry tests: Arize Phoenix, in a venv of its own so its pins never
# touch the project's environment.
if [ "$for_lab" = 0 ] && [ ! -x .venv-otlp/bin/phoenix ]; then
  echo "== installing an OTLP receiver (arize-phoenix) for the telemetry tests"
  "$python" -m venv .venv-otlp
  .venv-otlp/bin/pip install -q 'arize-phoenix>=12' 2> >(grep -v "^WARNING: Location 'file:" >&2)
fi

if [ -x scripts/build_labextension.sh ]; then
  extension_inputs=$(find install.json labextension/package.json labextension/package-lock.json \
                       labextension/tsconfig.json labextension/src labextension/style -type f -print0 \
                     | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  if up_to_date labextension "$extension_inputs" && [ -f agio_notebook/labextension/package.json ] \
     && [ -e .venv/share/jupyter/labextensions/agio-notebook/package.json ]; then
    echo "== JupyterLab extension already built (sources unchanged)"
  else
    echo "== building the JupyterLab extension"
    PATH="$PWD/.venv/bin:$PATH" scripts/build_labextension.sh
    echo "$extension_inputs" > "$stamps/labextension"
  fi
fi
