"""Packaging hook: a wheel (not an editable install) ships cubins, compiled here by `cukiln build`, and the native
hot path built for the torch installed here (runtime/native.py).

setuptools copies the packages into the build folder first; the AOT build then runs against that copy
(so generated/ there gets the cubins and a manifest that matches them). CUKILN_WHEEL_ARCHS
(comma-separated, e.g. "sm_90") picks the archs; default: the release archs (core/archs.py), more than a plain
`cukiln build` compiles, since a wheel runs on GPUs it was not built beside. The compile cache in the user
cache dir makes a second wheel build quick.
"""

import os
import runpy
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithCubins(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install uses the source tree's generated/: `cukiln build` fills it
        # Only the cubins built now, which the manifest written with them describes (not any that the
        # source tree happens to hold).
        shutil.rmtree(os.path.join(self.build_lib, "cukiln", "generated", "cubins"), ignore_errors=True)
        cmd = [sys.executable, "-m", "cukiln.tools.cli", "build"]
        archs = os.environ.get("CUKILN_WHEEL_ARCHS") or ",".join(_release_archs())
        cmd += ["--arch", archs]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.abspath(self.build_lib),
                                                                         os.environ.get("PYTHONPATH")]))}
        self.announce(f"compiling cubins for the wheel: {' '.join(cmd[2:])}", level=2)
        subprocess.run(cmd, check=True, env=env, cwd=self.build_lib)
        # The native hot path for the torch installed here, so that the wheel needs no compiler with that torch
        # (another torch compiles its own on first use, announced). Without torch, or where it cannot build: none.
        package = os.path.abspath(os.path.join(self.build_lib, "cukiln"))
        subprocess.run([sys.executable, "-c", _PACKAGE_NATIVE, package], check=True, env=env, cwd=self.build_lib)


def _release_archs() -> tuple[str, ...]:
    # core/archs.py imports nothing of cukiln's: read from the source tree, not an installed cukiln
    return runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "core", "archs.py"))["RELEASE_ARCHS"]


# The extension for the installed torch (compiled now if it is not yet) copied into the package's native/ folder,
# where runtime/native.py looks first.
_PACKAGE_NATIVE = """
import shutil, sys
from pathlib import Path
try:
    import torch
except ImportError:
    sys.exit(0)
from cukiln import native
loaded = native.module()
if loaded is None:
    sys.exit(print(f"no native hot path in the wheel: {native.off_reason()}"))
target = Path(sys.argv[1]) / "native" / native.build_name(torch)
if Path(loaded.__file__).parent.resolve() != target.resolve():  # not the package's own copy, from a build before
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(loaded.__file__, target)
print(f"native hot path in the wheel: {target}")
"""


setup(cmdclass={"build_py": BuildWithCubins})
