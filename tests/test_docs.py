"""The docs hold only what is true of the tree: docs/api.md is what the ops' schemas write (tools/api_doc.py), every
file a doc links to exists, ARCHITECTURE's variant counts are the build's, and the README stays a page a reader can
walk (300 lines at most)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_api_reference_is_what_the_schemas_write():
    pytest.importorskip("cuda.bindings")  # the runtime's modules import it
    from cukiln.tools import api_doc

    assert (ROOT / "docs" / "api.md").read_text() == api_doc.render(), \
        "docs/api.md is stale: run `python -m cukiln.tools.api_doc > docs/api.md`"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_doc_links_to_exists(doc):
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if "://" in target:
            continue
        if not (doc.parent / target).resolve().exists():
            missing.append(target)
    assert not missing, f"{doc.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_the_readme_is_a_page_a_reader_can_walk():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_the_variant_counts_are_the_builds():
    import collections

    from cukiln.codegen.ops import all_variants

    text = " ".join((ROOT / "docs" / "ARCHITECTURE.md").read_text().split("## Variant counts", 1)[1].split("##")[0].split())
    counts = collections.Counter(v.op for v in all_variants())
    stated = {"rope": r"RoPE: (\d+)", "kv_append": r"Cache append: (\d+)", "decode_step": r"Fused decode step: (\d+)"}
    for op, pattern in stated.items():
        assert int(re.search(pattern, text)[1]) == counts[op], f"ARCHITECTURE.md: {op} has {counts[op]} variants"
    decode = sum(int(n) for n in re.findall(r"(\d+) (?:narrow variants|deep and wide|ws and ws_deep|over FP8 caches|"
                                                r"over paged pools)", text))
    assert decode == counts["decode"], f"ARCHITECTURE.md: decode attention has {counts['decode']} variants"
    assert int(re.search(r"(\d+) in all", text)[1]) == sum(counts.values())
