#!/usr/bin/env bash
# Start LiteLLM's proxy on 127.0.0.1 with mock models (scripts/local_llm.yaml): a real OpenAI-compatible
# server to try agio against, offline. Usage: scripts/local_llm.sh [--port N]   (Ctrl-C stops it)
set -euo pipefail
cd "$(dirname "$0")/.."
port=4000
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=${2:?--port needs a number}; shift 2 ;;
    -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
    *) echo "local_llm.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
scripts/setup.sh --litellm
cat <<MSG
== LiteLLM's proxy on http://127.0.0.1:$port/v1 with the models mock-gpt and mock-slow. In a notebook:
     import os; os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:$port/v1"
     os.environ["OPENAI_API_KEY"] = "sk-agio-local-0000000000"
     agent = Agent(model=OpenAIModel("mock-gpt"))
   (mock models answer with their set text, and stream no tool calls: agio then asks for the reply whole)
MSG
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_TELEMETRY=False NO_PROXY="*"  # offline: prices from the package
exec .venv-litellm/bin/litellm --config scripts/local_llm.yaml --host 127.0.0.1 --port "$port"
