"""mlx-lm's speculative decoding (speculative_generate_step), the oracle for gen.Speculative.

The target and the draft run inside mlx_lm.generate.speculative_generate_step
itself (what mlx_lm.generate --draft-model and mlx_lm.server run), each behind
a thin recorder that keeps what the model returns on each call. So the prefill
split, the draft and verify calls, the sampler calls and their random keys, the
logits processors' prev_tokens and the cache trims of rejected drafts are
mlx-lm's.

Pairs (all share one vocabulary):
  * tiny seeded models from make_tiny.py: the target llama-bf16 with
      - llama-draft1-bf16: a smaller draft made here from the same seeded
        weights, the target's first layer only (embeddings, norm and head
        shared), so it agrees with the target on some tokens and not others;
      - llama-q4g64 (make_tiny's 4-bit llama): it agrees more often;
    and qwen3-bf16 with qwen3-q4g64 under --kv-bits 4 from token 0 (the
    quantized caches trimmed);
  * real SmolLM2-135M-Instruct (smollm2_gguf.py's MLX model) as its own draft,
    on a chat prompt.
Greedy and seeded sampling (mx.random.seed(seed) right after loading, as
gen/testdata/generate_oracle.py), with and without a repetition penalty
(which runs the processors path of _step).

Output: <oracle>/speculative/<case>.safetensors with
  prompt_ids int32 [P]; tokens int32 [S] (what speculative_generate_step yields);
  from_draft int32 [S] (1: an accepted draft token);
  logprobs float32 [S, V] (the log-probabilities yielded with each token);
  target_logits float32 [sum(target_rows), V] (every verify call's output rows:
    the last token and each draft, accepted or not), target_rows int32 [R];
  draft_logits float32 [D, V] (the last position of every draft call);
  plain_tokens int32 [S] (greedy cases: generate_step without a draft),
and <oracle>/speculative/index.json with the settings, versions, the acceptance
and whether the greedy text equals the plain one.

    python speculative.py
"""

import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.generate import generate_step, speculative_generate_step
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.sample_utils import make_logits_processors, make_sampler
from mlx_lm.utils import _get_classes, load_model, save_config, save_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from oracle_common import fingerprint_dir, oracle_dir, prompt_ids, versions, write_json  # noqa: E402


class Recorder:
    """Stands in for a model inside speculative_generate_step: calls it
    unchanged and keeps each call's input length and output."""

    def __init__(self, model):
        self.model = model
        self.calls = []

    def __call__(self, inputs, cache=None, input_embeddings=None):
        out = self.model(inputs, cache=cache)
        self.calls.append((int(inputs.shape[1]), out))
        return out

    @property
    def layers(self):
        return self.model.layers


def make_draft1(models: Path, out: Path) -> Path:
    """llama-bf16 cut to its first layer: a smaller draft sharing the target's
    seeded embeddings, final norm and head."""
    src = models / "llama-bf16"
    config = json.loads((src / "config.json").read_text())
    config["num_hidden_layers"] = 1
    weights = mx.load(str(src / "model.safetensors"))
    weights = {k: v for k, v in weights.items() if not k.startswith("model.layers.") or k.startswith("model.layers.0.")}
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    if out.exists():
        shutil.rmtree(out)
    save_model(out, model)
    save_config(dict(config), out / "config.json")
    return out


def prefill_calls(prompt_len: int, step: int) -> int:
    """How many model calls _prefill makes: chunks while more than one token is left."""
    n, left = 0, prompt_len
    while left > 1:
        left -= min(step, left - 1)
        n += 1
    return n


def run(target_dir: Path, draft_dir: Path, prompt: list, c: dict) -> dict:
    model, _ = load_model(target_dir)
    draft, _ = load_model(draft_dir)
    mx.random.seed(c["seed"])
    sampler = make_sampler(c["temp"], c.get("top_p", 1.0), 0.0, 1)
    procs = make_logits_processors(None, c.get("repetition_penalty"), c.get("repetition_context_size", 20))
    tgt, drf = Recorder(model), Recorder(draft)
    cache = make_prompt_cache(model) + make_prompt_cache(draft)
    tokens, from_draft, logprobs = [], [], []
    for tok, lp, fd in speculative_generate_step(
        mx.array(prompt, dtype=mx.uint32), tgt, drf, num_draft_tokens=c["num_draft_tokens"],
        max_tokens=c["steps"], sampler=sampler, logits_processors=procs, prompt_cache=cache,
        prefill_step_size=c["prefill_step_size"], kv_bits=c.get("kv_bits"), kv_group_size=64,
        quantized_kv_start=c.get("quantized_kv_start", 5000),
    ):
        tokens.append(int(tok))
        from_draft.append(int(bool(fd)))
        logprobs.append(lp.reshape(-1))
    skip = prefill_calls(len(prompt), c["prefill_step_size"])
    tcalls, dcalls = tgt.calls[skip:], drf.calls[skip:]
    target_rows = [n for n, _ in tcalls]
    target_logits = mx.concatenate([out[0] for _, out in tcalls], axis=0)
    draft_logits = mx.concatenate([out[0, -1:] for _, out in dcalls], axis=0) if dcalls else None
    res = {
        "tokens": np.array(tokens, dtype=np.int32),
        "from_draft": np.array(from_draft, dtype=np.int32),
        "logprobs": np.array(mx.stack(logprobs).astype(mx.float32)),
        "target_logits": np.array(target_logits.astype(mx.float32)),
        "target_rows": np.array(target_rows, dtype=np.int32),
        "logits_dtype": str(target_logits.dtype).removeprefix("mlx.core."),
    }
    if draft_logits is not None:
        res["draft_logits"] = np.array(draft_logits.astype(mx.float32))
    if c["temp"] == 0 and not c.get("repetition_penalty"):
        plain = [int(t) for t, _ in generate_step(mx.array(prompt, dtype=mx.uint32), model, max_tokens=c["steps"],
                                                   prefill_step_size=c["prefill_step_size"],
                                                   kv_bits=c.get("kv_bits"), kv_group_size=64,
                                                   quantized_kv_start=c.get("quantized_kv_start", 5000))]
        res["plain_tokens"] = np.array(plain, dtype=np.int32)
    return res


TINY = dict(prompt_len=24, prompt_seed=3, steps=48, seed=0, temp=0.0, num_draft_tokens=3, prefill_step_size=2048)


def cases(root: Path) -> dict:
    models = root / "models"
    d1 = str((root / "speculative" / "models" / "llama-draft1-bf16").relative_to(root))
    out = {
        "llama-draft1-greedy": dict(TINY, target="models/llama-bf16", draft=d1),
        "llama-draft1-greedy-k1": dict(TINY, target="models/llama-bf16", draft=d1, num_draft_tokens=1, steps=33),
        "llama-draft1-greedy-chunked": dict(TINY, target="models/llama-bf16", draft=d1, prefill_step_size=8, steps=31),
        "llama-draft1-sample": dict(TINY, target="models/llama-bf16", draft=d1, temp=0.3, top_p=0.95, seed=7),
        "llama-draft1-repetition": dict(TINY, target="models/llama-bf16", draft=d1, repetition_penalty=1.3,
                                        repetition_context_size=10),
        "llama-draft1-sample-repetition": dict(TINY, target="models/llama-bf16", draft=d1, temp=0.3, seed=5,
                                               repetition_penalty=1.2, num_draft_tokens=2),
        "llama-q4-greedy": dict(TINY, target="models/llama-bf16", draft="models/llama-q4g64", num_draft_tokens=4),
        "llama-q4-sample": dict(TINY, target="models/llama-bf16", draft="models/llama-q4g64", temp=0.2, seed=11),
        "qwen3-q4-kv4-greedy": dict(TINY, target="models/qwen3-bf16", draft="models/qwen3-q4g64", kv_bits=4,
                                    quantized_kv_start=0, steps=40),
    }
    smol = models / "smollm2-q4_1"
    if (smol / "config.json").exists():
        from mlx_lm import load
        _, tok = load(str(smol))
        text = "Write a haiku about the sea"
        s = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
        ids = tok.encode(s, add_special_tokens=False)
        base = dict(prompt=ids, prompt_text=text, steps=40, seed=0, temp=0.0, num_draft_tokens=3,
                    prefill_step_size=2048, target="models/smollm2-q4_1", draft="models/smollm2-q4_1")
        out["smollm2-self-greedy"] = base
        out["smollm2-self-sample"] = dict(base, temp=0.7, seed=3, num_draft_tokens=2)
    else:
        print(f"speculative: no {smol} (smollm2_gguf.py): SmolLM2 cases left out", file=sys.stderr)
    return out


def main() -> int:
    mx.set_default_device(mx.cpu)
    root = oracle_dir()
    out = root / "speculative"
    out.mkdir(parents=True, exist_ok=True)
    make_draft1(root / "models", out / "models" / "llama-draft1-bf16")
    index = {}
    for name, c in cases(root).items():
        target, draft = root / c["target"], root / c["draft"]
        cfg = json.loads((target / "config.json").read_text())
        prompt = c.get("prompt") or prompt_ids(c["prompt_seed"], c["prompt_len"], cfg["vocab_size"])
        res = run(target, draft, prompt, c)
        again = run(target, draft, prompt, c)
        if not np.array_equal(res["tokens"], again["tokens"]) or not np.array_equal(res["logprobs"], again["logprobs"]):
            raise RuntimeError(f"{name}: a second run differs: the CPU results must not depend on timing")
        arrays = {k: mx.array(v) for k, v in res.items() if isinstance(v, np.ndarray)}
        arrays["prompt_ids"] = mx.array(np.array(prompt, dtype=np.int32))
        mx.save_safetensors(str(out / f"{name}.safetensors"), arrays,
                            metadata={"case": name, "format": "mlxgo-speculative-v1"})
        drafted = int(res["target_rows"].sum() - len(res["target_rows"]))
        accepted = int(res["from_draft"].sum())
        entry = {k: v for k, v in c.items() if k != "prompt"}
        entry.update(file=f"{name}.safetensors", prompt_len=len(prompt), logits_dtype=res["logits_dtype"],
                     target_files=fingerprint_dir(target), draft_files=fingerprint_dir(draft),
                     drafted=drafted, accepted=accepted, target_calls=len(res["target_rows"]))
        if "plain_tokens" in res:
            entry["greedy_equals_plain"] = bool(np.array_equal(res["tokens"], res["plain_tokens"]))
        index[name] = entry
        print(f"speculative: {name}: {len(res['tokens'])} tokens, accepted {accepted}/{drafted} drafts"
              f"{', same as plain' if entry.get('greedy_equals_plain') else ''}", file=sys.stderr)
    write_json(out / "index.json", {"format": "mlxgo-speculative-v1", "versions": versions(), "cases": index})
    return 0


if __name__ == "__main__":
    sys.exit(main())
