"""Encode a JSON-lines corpus with the pinned Hugging Face tokenizers (the parity oracle).

Usage: oracle_tok.py TOKENIZER_JSON CORPUS_JSONL OUT_JSONL [--add-special]
Writes one JSON line per document: {"ids": [...], "text": decode(ids)}.
Truncation and padding are switched off: parity is about tokenization.
"""
import json
import sys

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    tok.no_truncation()
    tok.no_padding()
    add = "--add-special" in sys.argv
    with open(sys.argv[2], encoding="utf-8") as f, open(sys.argv[3], "w", encoding="utf-8") as out:
        for line in f:
            ids = tok.encode(json.loads(line), add_special_tokens=add).ids
            out.write(json.dumps({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False)}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
