"""cukiln.core: the facts every part of cukiln shares, with no dependency of its own beyond the standard library.

``artifacts``: where generated/ lives and how its manifest and tuning store are read and written; ``archs``:
GPU architecture names, the archs a build targets, and what each arch can do. codegen, tools and the runtime
all read these from here, so that each fact has one home.
"""
