#!/usr/bin/env bash
# Install a cukiln wheel into a fresh virtual environment and run installed_wheel_check.py there, from
# outside the source tree. The new environment reaches the current interpreter's packages (torch,
# cuda-bindings) through a path file placed after its own site-packages, so its cukiln is the wheel's;
# the check itself hides NVRTC.
#   bash tests/packaging/run_wheel_check.sh dist/cukiln-*.whl
set -euo pipefail
wheel=$(realpath "$1")
check=$(realpath "$(dirname "$0")/installed_wheel_check.py")
parent_site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
work=$(mktemp -d)
python3 -m venv "$work/venv"
env_site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$parent_site" > "$env_site/zz-parent-packages.pth"
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel"
cd "$work"
"$work/venv/bin/python" -I "$check"
