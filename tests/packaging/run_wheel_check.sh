#!/usr/bin/env bash
# Install a cukiln wheel into a fresh virtual environment and run installed_wheel_check.py there, from
# outside the source tree, on a machine with a CUDA GPU (it runs the wheel's kernels). The new environment
# reaches the current interpreter's packages (torch, cuda-bindings) through a path file placed after its own
# site-packages, so its cukiln is the wheel's; the check itself hides NVRTC. The temporary environment is
# removed when the check ends, however it ends.
#   bash tests/packaging/run_wheel_check.sh dist/cukiln-*.whl
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: bash tests/packaging/run_wheel_check.sh WHEEL (a built cukiln wheel, e.g. dist/cukiln-*.whl)" >&2
  exit 2
fi
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "run_wheel_check.sh: needs a CUDA GPU and a CUDA build of torch (it runs the wheel's kernels)" >&2
  exit 2
fi
wheel=$(realpath "$1")
check=$(realpath "$(dirname "$0")/installed_wheel_check.py")
parent_site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
env_site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$parent_site" > "$env_site/zz-parent-packages.pth"
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel"
cd "$work"
"$work/venv/bin/python" -I "$check"
