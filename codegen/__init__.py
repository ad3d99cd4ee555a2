"""cukiln.codegen: the variant space, rendering, NVRTC compilation, emission of generated/, the CLI.

Never imports the runtime (cukiln's public API); the runtime imports this package only lazily, to
compile a missing cubin.
"""
