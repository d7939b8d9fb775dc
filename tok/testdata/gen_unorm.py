"""Generate tok/unorm/tables.txt from Python's unicodedata (run with the pinned .venv).

The Go standard library has no normalization data and the project keeps its
dependencies to the standard library, so mlxgo carries its own compact table:

    v <unicode version>
    c <first>-<last> <ccc>     canonical combining class of a range (non-zero only)
    d <cp> <cp> [<cp>]         canonical decomposition (one level)
    k <cp> <cp>...             compatibility decomposition (one level)
    x <cp>                     canonical pair decomposition excluded from composition

All numbers are hexadecimal. Hangul syllables are algorithmic and not listed.
Hugging Face tokenizers (the parity oracle) normalizes with an older Unicode
version than Python's: a decomposition that the pinned oracle leaves unchanged
is dropped, so that both agree on every code point.
Usage: .venv/bin/python tok/testdata/gen_unorm.py > tok/unorm/tables.txt
"""
import unicodedata
import sys

from tokenizers import normalizers


def oracle_unchanged(form):
    """Code points that the pinned tokenizers' normalizer `form` maps to themselves."""
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
    got = getattr(normalizers, form)().normalize_str("\x00".join(chars)).split("\x00")
    return {ord(c) for c, g in zip(chars, got) if g == c}

out = sys.stdout
out.write("v %s\n" % unicodedata.unidata_version)  # minus what the oracle leaves unchanged
run = None
for cp in range(0x110000 + 1):
    ccc = unicodedata.combining(chr(cp)) if cp < 0x110000 else 0
    if run and (ccc != run[2] or cp != run[1] + 1):
        if run[2]:
            out.write("c %X-%X %d\n" % run)
        run = None
    if run is None:
        run = (cp, cp, ccc)
    else:
        run = (run[0], cp, ccc)

keep_d = oracle_unchanged("NFD")
keep_k = oracle_unchanged("NFKD")
for cp in range(0x110000):
    if 0xAC00 <= cp <= 0xD7A3:
        continue
    dec = unicodedata.decomposition(chr(cp))
    if not dec:
        continue
    parts = dec.split()
    if parts[0].startswith("<"):
        if cp in keep_k:
            continue
        out.write("k %X %s\n" % (cp, " ".join(parts[1:])))
        continue
    if cp in keep_d:
        continue
    out.write("d %X %s\n" % (cp, " ".join(parts)))
    if len(parts) == 2 and unicodedata.normalize("NFC", chr(cp)) != chr(cp):
        out.write("x %X\n" % cp)
