"""Made-up cubins for the CPU tests of the build and the report: ELF files of the sections given."""

from __future__ import annotations


def elf_file(sections: dict[str, bytes]) -> bytes:
    """A 64-bit ELF file of these sections (and its section-name table), as a cubin lays them out."""
    import struct

    names = b"\0" + b"".join(n.encode() + b"\0" for n in list(sections) + [".shstrtab"])
    body, offsets = b"", []
    for data in list(sections.values()) + [names]:
        offsets.append(64 + len(body))
        body += data
    table = 64 + len(body)
    header = bytearray(64)
    header[:5] = b"\x7fELF\x02"
    struct.pack_into("<Q", header, 0x28, table)
    struct.pack_into("<HHH", header, 0x3A, 64, len(sections) + 2, len(sections) + 1)
    entries = [bytes(64)]
    for i, (name, data) in enumerate(list(sections.items()) + [(".shstrtab", names)]):
        entry = bytearray(64)
        struct.pack_into("<IIQQQQ", entry, 0, names.index(name.encode() + b"\0"), 1, 0, 0, offsets[i], len(data))
        entries.append(bytes(entry))
    return bytes(header) + body + b"".join(entries)
