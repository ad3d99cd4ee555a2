"""Run on a GPU where cukiln is installed from source (`pip install -e .` or `pip install .`): a user's first calls
in a fresh environment (an empty user cache, so nothing compiled before), each timed, with what cukiln announced on
stderr meanwhile. Fails when a step took longer than SILENT_LIMIT_S and announced nothing: a wait for a compile the
user was not told of.

    python tests/packaging/first_call_check.py [--json PATH]

Prints a line per step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

SILENT_LIMIT_S = 2.0  # longer than any load or plan; a compile takes tens of seconds


class Recorder:
    """stderr as it is, with each line the process writes through Python also kept (warnings go there too)."""

    def __init__(self, stream):
        self.stream, self.lines = stream, []

    def write(self, text):
        self.lines += [line for line in text.splitlines() if line.strip()]
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the steps here too")
    args = parser.parse_args()
    os.environ["CUKILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="cukiln-first-call-")
    recorder = sys.stderr = Recorder(sys.stderr)
    warnings.simplefilter("always")
    steps = []

    def step(name, work):
        seen = len(recorder.lines)
        start = time.perf_counter()
        result = work()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        said = recorder.lines[seen:]
        steps.append({"step": name, "seconds": round(seconds, 3), "announced": said})
        print(f"{name:<44} {seconds:8.2f} s  {'announced: ' + said[0][:90] if said else 'nothing announced'}",
              file=sys.__stdout__)
        return result

    import torch

    torch.zeros(1, device="cuda")  # the CUDA context, before anything of cukiln's
    cukiln = step("import cukiln", lambda: __import__("cukiln"))
    step("import cukiln.torch", lambda: __import__("cukiln.torch"))
    torch.manual_seed(0)
    x = torch.randn(64, 2, 8, 128, device="cuda", dtype=torch.bfloat16)
    freqs = torch.rand(64, 1, 1, 128, device="cuda") * 10
    step("cukiln.rope (first call)", lambda: cukiln.rope(x, freqs=freqs))
    step("cukiln.rope (second call)", lambda: cukiln.rope(x, freqs=freqs))
    step("cukiln.torch.rope (first call)", lambda: cukiln.torch.rope(x, freqs=freqs))
    step("cukiln.torch.rope (second call)", lambda: cukiln.torch.rope(x, freqs=freqs))
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 4096, 128, device="cuda", dtype=torch.bfloat16)[:, :, :1000]
    lens = torch.tensor([1000, 321], dtype=torch.int32, device="cuda")
    step("cukiln.torch.decode_attention (first call)", lambda: cukiln.torch.decode_attention(q, k, k, lens))
    silent = [s for s in steps if s["seconds"] > SILENT_LIMIT_S and not s["announced"]]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "silent_limit_s": SILENT_LIMIT_S, "steps": steps}, f, indent=1)
    if silent:
        sys.exit(f"FAILED: {len(silent)} step(s) waited over {SILENT_LIMIT_S} s announcing nothing: "
                 f"{', '.join(s['step'] for s in silent)}")
    print(f"every step over {SILENT_LIMIT_S} s announced what it waited for", file=sys.__stdout__)


if __name__ == "__main__":
    main()
