#!/usr/bin/env bash
# Install the peer systems the benchmark compares jobpulse with, outside jobpulse's own venv:
#   bench/.peers/venv   MLflow, Aim, TensorBoard + tensorboardX, ClearML, W&B (pinned in peers/requirements.txt)
#   victoria-metrics    Debian's package (apt-get); only its binary is used, no service is enabled
# Safe to run again: an existing venv is reused and pip only installs what is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.peers/venv"
python="${PEERS_PYTHON:-python3.11}"

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$here/.peers"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r "$here/peers/requirements.txt"

if ! command -v victoria-metrics >/dev/null 2>&1 && [ ! -x /usr/bin/victoria-metrics ]; then
    if command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        sudo_cmd=""
        [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
        $sudo_cmd apt-get update -qq
        $sudo_cmd apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends victoria-metrics
        # The package may enable a service on its default port; the benchmark starts its own instance.
        if command -v systemctl >/dev/null 2>&1; then $sudo_cmd systemctl disable --now victoria-metrics 2>/dev/null || true; fi
    else
        echo "apt-get not found: VictoriaMetrics will be reported as not available" >&2
    fi
fi
echo "peers ready in $venv"
