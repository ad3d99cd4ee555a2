# Sourced by the GPU-session scripts: `cukiln` as the Python that `python3 -m pip` installed the project into. On the
# GPU machine a bare `pip` and the `cukiln` script it leaves on PATH belong to another Python, without the project's
# dependencies.
cukiln() { python3 -c 'import sys; from cukiln.tools.cli import main; sys.exit(main())' "$@"; }
