#!/usr/bin/env bash
# Make the venvs in which the trainer adapters are tested against the real trainers, which cannot
# install beside .venv's pins: .venv-verl (verl 0.9.1 needs transformers<5.11) and .venv-verifiers
# (verifiers 0.4.0 needs openai<3). Each holds dreamgym_env (editable, no extras), pytest and the real
# package. scripts/test.sh runs tests/integrations/test_integrations_verl.py and tests/integrations/test_integrations_verifiers.py
# in them.
# Usage: scripts/install_integrations.sh [verl] [verifiers]   (default: both)
# Idempotent: a venv whose stamp matches this script and pyproject.toml, and whose package imports,
# is left as it is (a second run takes about 10 seconds).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VERL=verl==0.9.1
VERIFIERS=verifiers==0.4.0

# verl is installed without its dependencies, which include Ray's full distribution, wandb,
# tensorboard, accelerate and peft: the agent loop's module (verl/experimental/agent_loop/agent_loop.py)
# and the worker, dataset and config code the tests drive import only these, pinned as verl 0.9.1
# declares them. torch is the CPU build (pip's find-links has it; a plain PyPI torch is a CUDA build).
VERL_DEPS=(
  "torch==2.13.0"
  "transformers>=5.5.3,<5.11,!=5.6.0"
  "tensordict>=0.8.0,<=0.10.0,!=0.9.0"
  "numpy>=2.0.0"
  "pyarrow>=19.0.0"
  "ray>=2.41.0"
  hydra-core omegaconf pillow codetiming datasets cachetools fastapi uvicorn
)

stamp_of() {
  # What a venv was made from: this script and the project's dependencies.
  cat scripts/install_integrations.sh pyproject.toml | sha256sum | cut -d' ' -f1
}

up_to_date() {  # venv, module that must import
  [ -x "$1/bin/python" ] && [ "$(cat "$1/.dreamgym-stamp" 2>/dev/null)" = "$(stamp_of)" ] \
    && "$1/bin/python" -c "import $2, dreamgym_env" >/dev/null 2>&1
}

make_venv() {  # venv
  [ -x "$1/bin/python" ] || "$PYTHON" -m venv "$1"
  rm -f "$1/.dreamgym-stamp"
}

install_verl() {
  local venv=.venv-verl
  if up_to_date "$venv" verl.experimental.agent_loop.agent_loop; then
    echo "$venv: up to date"
    return
  fi
  echo "$venv: installing $VERL (about 2 minutes)..."
  make_venv "$venv"
  local pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
  "${pip[@]}" install -e . pytest "${VERL_DEPS[@]}"
  "${pip[@]}" install --no-deps "$VERL"
  # verl's wheel also installs its own test suite as a top-level package named `tests`, which would
  # shadow this repository's tests/ (imported as `tests.*`); verl itself never imports it.
  "$venv/bin/python" - <<'EOF'
import importlib.metadata, pathlib, shutil, sysconfig
files = importlib.metadata.distribution("verl").files or []
if any(str(f) == "tests/__init__.py" for f in files):
    shutil.rmtree(pathlib.Path(sysconfig.get_paths()["purelib"]) / "tests", ignore_errors=True)
EOF
  "$venv/bin/python" -c "import verl.experimental.agent_loop.agent_loop, dreamgym_env"
  stamp_of > "$venv/.dreamgym-stamp"
}

install_verifiers() {
  local venv=.venv-verifiers
  if up_to_date "$venv" verifiers.v1; then
    echo "$venv: up to date"
    return
  fi
  echo "$venv: installing $VERIFIERS (about a minute)..."
  make_venv "$venv"
  # uv: verifiers' agents run their harness program with it (`uv sync --script`, from PyPI); without
  # it on PATH verifiers tries to download it from outside the package registries.
  "$venv/bin/python" -m pip --disable-pip-version-check -q install -e . pytest "$VERIFIERS" uv
  "$venv/bin/python" -c "import verifiers.v1, dreamgym_env"
  stamp_of > "$venv/.dreamgym-stamp"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(verl verifiers)
for target in "${targets[@]}"; do
  case "$target" in
    verl) install_verl ;;
    verifiers) install_verifiers ;;
    *) echo "unknown target: $target (verl or verifiers)" >&2; exit 2 ;;
  esac
done
