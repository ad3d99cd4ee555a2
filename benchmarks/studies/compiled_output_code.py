"""What torch.compile makes of the compiled rows of `cukiln bench overhead` (GPU): Inductor's output code and
Dynamo's guards for the compiled rope (allocating), rope_qk, decode_attention and decode_step functions, each called
twice.

    TORCH_LOGS="output_code,guards" python benchmarks/studies/compiled_output_code.py > compiled-output-code.log 2>&1
"""

from __future__ import annotations

import torch

from cukiln.tools import overhead

ROWS = r"torch\.compile\(fullgraph\) of cukiln\.torch\.(rope_qk|decode_step|decode_attention|rope \(allocates)"


def main() -> None:
    for name, fn in overhead._paths(only=ROWS).items():
        if "cukiln" in name:
            print("=== PATH", name, flush=True)
            fn()
            fn()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
