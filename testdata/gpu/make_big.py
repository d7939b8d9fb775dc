"""Random-weight models of Llama-3.2-1B's and Llama-3.1-8B's shapes, bf16 and
4-bit g64, built on the GPU (seconds instead of the CPU's minutes), for
testdata/gpu/run.sh's benchmarks only: decode speed does not depend on the
values. Each gets the Llama 3.1 tokenizer (same 128256 ids) from --tokenizer.

    python make_big.py --out /tmp/big --tokenizer .cache/data/tokenizers/llama3_1 1b 8b
"""

import argparse
import shutil
import sys
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten, tree_map_with_path
from mlx_lm.utils import _get_classes, quantize_model, save_config, save_model

ROPE = dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=8192)
SHAPES = {
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8,
               head_dim=64, num_hidden_layers=16, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
               head_dim=128, num_hidden_layers=32, tie_word_embeddings=False),
}


def config(shape: str) -> dict:
    return dict(model_type="llama", rms_norm_eps=1e-5, vocab_size=128256, max_position_embeddings=131072,
                rope_theta=500000.0, rope_scaling=ROPE, torch_dtype="bfloat16", **SHAPES[shape])


def build(shape: str, out: Path, tokenizer: Path, seed: int) -> None:
    cfg = config(shape)
    model_class, args_class = _get_classes(cfg)
    model = model_class(args_class.from_dict(cfg))
    mx.random.seed(seed)

    def draw(path, v):
        if path.endswith("norm.weight"):
            return (1.0 + 0.1 * mx.random.normal(v.shape)).astype(mx.bfloat16)
        return (0.02 * mx.random.normal(v.shape, dtype=mx.bfloat16)).astype(mx.bfloat16)

    model.update(tree_map_with_path(draw, model.parameters()))
    for _, v in tree_flatten(model.parameters()):
        mx.eval(v)
    for name, quant in (("bf16", None), ("q4g64", (64, 4))):
        d = out / f"llama{shape}-{name}"
        if d.exists():
            shutil.rmtree(d)
        c = dict(cfg)
        if quant:
            model, c = quantize_model(model, c, quant[0], quant[1])
        save_model(d, model)
        save_config(c, d / "config.json")
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tokenizer / f, d / f)
        print(f"make_big: wrote {d}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("shapes", nargs="+", choices=sorted(SHAPES))
    args = ap.parse_args()
    mx.set_default_device(mx.gpu)
    for i, s in enumerate(args.shapes):
        build(s, args.out, args.tokenizer, 20261201 + i)
    return 0


if __name__ == "__main__":
    sys.exit(main())
