#!/usr/bin/env bash
# Install a cukiln wheel into a fresh virtual environment and run installed_wheel_check.py there, from
# outside the source tree. The environment sees the system's site-packages (torch, cuda-bindings) but
# not the source tree; the check hides NVRTC itself.
#   bash tests/packaging/run_wheel_check.sh dist/cukiln-*.whl
set -euo pipefail
wheel=$(realpath "$1")
check=$(realpath "$(dirname "$0")/installed_wheel_check.py")
env_dir=$(mktemp -d)/venv
python3 -m venv --system-site-packages "$env_dir"
"$env_dir/bin/python" -m pip install -q --no-deps --no-index "$wheel"
cd "$(dirname "$env_dir")"
"$env_dir/bin/python" -I "$check"
