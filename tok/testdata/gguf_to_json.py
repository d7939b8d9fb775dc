"""Convert a GGUF file's tokenizer to tokenizer.json with transformers' GGUF
tokenizer converter (the reference for GGUF tokenizers).

transformers' own GGUF reader imports torch, which the oracle venv does not
have, so the metadata is read with the `gguf` package (gguf==0.19.0 in the
venv) and handed to the same converter, grouped exactly as
transformers.integrations.gguf.gguf_tokenizer_mapping.get_gguf_tokenizer does.

transformers' converter ignores tokenizer.ggml.pre. For "smollm" the
pre-tokenizer is set to what SmolLM2's original tokenizer.json and llama.cpp
use (single digits, then GPT-2's byte-level regex); mlxgo follows the same.

Usage: gguf_to_json.py MODEL.gguf OUT_DIR   (writes OUT_DIR/tokenizer.json and add_bos.txt)
"""
import os
import sys

from gguf import GGUFReader
from tokenizers import pre_tokenizers
from transformers.integrations.gguf.gguf_tokenizer_mapping import (
    GGUF_TOKENIZER_MAPPING,
    convert_gguf_tokenizer,
)


def main():
    reader = GGUFReader(sys.argv[1])
    meta = {name: field.contents() for name, field in reader.fields.items()}
    grouped = {
        group: {name: meta[f"tokenizer.{key}"] for key, name in renames.items() if f"tokenizer.{key}" in meta}
        for group, renames in GGUF_TOKENIZER_MAPPING.items()
    }
    tokenizer, config = grouped["tokenizer"], grouped["tokenizer_config"]
    backend, _ = convert_gguf_tokenizer(meta["general.architecture"], tokenizer)
    if meta.get("tokenizer.ggml.pre") == "smollm":
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    backend.save(os.path.join(sys.argv[2], "tokenizer.json"))
    with open(os.path.join(sys.argv[2], "add_bos.txt"), "w") as f:
        f.write(str(config.get("add_bos_token")))


if __name__ == "__main__":
    main()
