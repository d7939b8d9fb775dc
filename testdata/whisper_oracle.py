"""The mlx-whisper 0.4.3 oracle for models/whisper (L1, DESIGN.md §6).

Converts the CTranslate2 tiny.en model.bin to mlx-whisper's layout (config.json +
weights.safetensors, float16 as stored), transcribes each clip with
mlx_whisper.transcribe() and its defaults (greedy with temperature fallback,
timestamps, condition_on_previous_text), and records for models/whisper's
oracle test, per clip, under OUT/<name>/:

  mel.f32          the log-mel of the whole clip + 30 s ([frames, 80] float32)
  enc<i>.f32       the encoder output of decoding <i> (float32 view of float16)
  logits<i>.f32    the decoder logits at the last position of every step of
                   decoding <i> (Inference.logits' float32 cast), [steps, rows,
                   vocab]: one row, or best_of rows when a decoding samples a group
  result.json      tokens per decoding, segments, text

Run from the whisper venv (testdata/whisper_requirements.txt):
  python testdata/whisper_oracle.py --model DIR --out DIR CLIP.wav...

mx.compile is switched off (mlx.nn.gelu is compiled, and on the CPU compiling
shells out to a C++ compiler); --compile keeps it on, to check that it changes nothing.
"""

import argparse
import json
import os
import struct
import sys
import types
import wave

# mlx-whisper imports these at module load for word timestamps (numba,
# scipy.signal) and hub downloads (huggingface_hub); transcribing a local model
# calls none of them. Stand-ins keep the venv free of torch-sized dependencies.
for name in ("numba", "scipy", "scipy.signal", "huggingface_hub"):
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules["numba"].jit = lambda *a, **k: (lambda f: f)
sys.modules["scipy"].signal = sys.modules["scipy.signal"]
sys.modules["huggingface_hub"].snapshot_download = None

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import mlx_whisper  # noqa: E402
from mlx_whisper import decoding, whisper  # noqa: E402
mwt = sys.modules["mlx_whisper.transcribe"]  # the package rebinds .transcribe to the function


def read_ct2(path):
    """Parse a CTranslate2 model.bin (binary version 6) into numpy arrays."""
    b = open(path, "rb").read()
    o = 0

    def u(fmt):
        nonlocal o
        v = struct.unpack_from("<" + fmt, b, o)
        o += struct.calcsize(fmt)
        return v[0]

    def s():
        nonlocal o
        n = u("H")
        v = b[o : o + n - 1].decode()
        o += n
        return v

    ver = u("I")
    assert ver >= 4, ver
    spec, _rev = s(), u("I")
    assert spec == "WhisperSpec", spec
    dtypes = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
    out = {}
    for _ in range(u("I")):
        name = s()
        dims = [u("I") for _ in range(u("B"))]
        dt, nb = u("B"), u("I")
        out[name] = np.frombuffer(b, dtypes[dt], nb // np.dtype(dtypes[dt]).itemsize, o).reshape(dims)
        o += nb
    for _ in range(u("I")):
        a, t = s(), s()
        out[a] = out[t]
    return out


def convert(ct2_dir, out_dir):
    v = read_ct2(os.path.join(ct2_dir, "model.bin"))
    w = {}
    n_state = v["encoder/conv1/weight"].shape[0]

    def lin(dst, src, bias=True):
        w[dst + ".weight"] = v[src + "/weight"]
        if bias:
            w[dst + ".bias"] = v[src + "/bias"]

    def ln(dst, src):
        w[dst + ".weight"], w[dst + ".bias"] = v[src + "/gamma"], v[src + "/beta"]

    def self_attn(dst, src):
        q, k, vv = np.split(v[src + "/linear_0/weight"], 3)
        qb, kb, vb = np.split(v[src + "/linear_0/bias"], 3)
        assert not kb.any()
        w[dst + ".query.weight"], w[dst + ".query.bias"] = q, qb
        w[dst + ".key.weight"] = k
        w[dst + ".value.weight"], w[dst + ".value.bias"] = vv, vb
        lin(dst + ".out", src + "/linear_1")

    for i in (1, 2):
        w[f"encoder.conv{i}.weight"] = v[f"encoder/conv{i}/weight"].swapaxes(1, 2)
        w[f"encoder.conv{i}.bias"] = v[f"encoder/conv{i}/bias"]
    n_audio_layer = sum(1 for k in v if k.startswith("encoder/layer_") and k.endswith("ffn/linear_0/weight"))
    n_text_layer = sum(1 for k in v if k.startswith("decoder/layer_") and k.endswith("ffn/linear_0/weight"))
    for i in range(n_audio_layer):
        p, s_ = f"encoder.blocks.{i}", f"encoder/layer_{i}"
        self_attn(p + ".attn", s_ + "/self_attention")
        ln(p + ".attn_ln", s_ + "/self_attention/layer_norm")
        lin(p + ".mlp1", s_ + "/ffn/linear_0")
        lin(p + ".mlp2", s_ + "/ffn/linear_1")
        ln(p + ".mlp_ln", s_ + "/ffn/layer_norm")
    ln("encoder.ln_post", "encoder/layer_norm")
    for i in range(n_text_layer):
        p, s_ = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        self_attn(p + ".attn", s_ + "/self_attention")
        ln(p + ".attn_ln", s_ + "/self_attention/layer_norm")
        lin(p + ".cross_attn.query", s_ + "/attention/linear_0")
        kw, vw = np.split(v[s_ + "/attention/linear_1/weight"], 2)
        kb, vb = np.split(v[s_ + "/attention/linear_1/bias"], 2)
        assert not kb.any()
        w[p + ".cross_attn.key.weight"] = kw
        w[p + ".cross_attn.value.weight"], w[p + ".cross_attn.value.bias"] = vw, vb
        lin(p + ".cross_attn.out", s_ + "/attention/linear_2")
        ln(p + ".cross_attn_ln", s_ + "/attention/layer_norm")
        lin(p + ".mlp1", s_ + "/ffn/linear_0")
        lin(p + ".mlp2", s_ + "/ffn/linear_1")
        ln(p + ".mlp_ln", s_ + "/ffn/layer_norm")
    w["decoder.token_embedding.weight"] = v["decoder/embeddings/weight"]
    w["decoder.positional_embedding"] = v["decoder/position_encodings/encodings"]
    ln("decoder.ln", "decoder/layer_norm")
    cfg = dict(
        n_mels=v["encoder/conv1/weight"].shape[1],
        n_audio_ctx=v["encoder/position_encodings/encodings"].shape[0],
        n_audio_state=n_state,
        n_audio_head=int(v["encoder/num_heads"]),
        n_audio_layer=n_audio_layer,
        n_vocab=v["decoder/embeddings/weight"].shape[0],
        n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
        n_text_state=n_state,
        n_text_head=int(v["decoder/num_heads"]),
        n_text_layer=n_text_layer,
    )
    os.makedirs(out_dir, exist_ok=True)
    mx.save_safetensors(os.path.join(out_dir, "weights.safetensors"), {k: mx.array(np.ascontiguousarray(a)) for k, a in w.items()})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dict(model_type="whisper", **cfg), f, indent=1)


def load_wav(path):
    """ffmpeg's s16le 16 kHz mono, as load_audio reads it (the clips are already that)."""
    with wave.open(path) as f:
        assert f.getframerate() == 16000 and f.getnchannels() == 1 and f.getsampwidth() == 2, path
        data = f.readframes(f.getnframes())
    return mx.array(np.frombuffer(data, np.int16)).flatten().astype(mx.float32) / 32768.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="CTranslate2 Whisper directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--concat", metavar="NAME=CLIP,CLIP...", help="also transcribe these clips joined, 2 s of silence apart, as OUT/NAME.wav (long-form seeking)")
    ap.add_argument("--tile", metavar="NAME=CLIP,SECONDS,N", action="append", default=[],
                    help="also transcribe the first SECONDS of CLIP repeated N times, as OUT/NAME.wav: a repetitive "
                    "transcript whose compression ratio sends every decoding to the next temperature (fallback, sampling)")
    ap.add_argument("--fp32", metavar="NAME=CLIP", action="append", default=[], help="also transcribe CLIP with fp16=False (float32 activations), recorded as NAME")
    ap.add_argument("--best-of", metavar="NAME=CLIP,N", action="append", default=[],
                    help="also transcribe CLIP (a path, or one of the --tile/--concat clips built above) with best_of=N: "
                    "every sampled decoding draws N sequences and keeps the best ranked, recorded as NAME")
    ap.add_argument("clips", nargs="*")
    a = ap.parse_args()
    if not a.compile:
        mx.disable_compile()
    mdir = os.path.join(a.out, "model-mlx")
    convert(a.model, mdir)

    rec = {}
    orig_mel = mwt.log_mel_spectrogram
    orig_logits = decoding.Inference.logits
    orig_enc = whisper.AudioEncoder.__call__
    orig_run = decoding.DecodingTask.run

    def mel_hook(*args, **kw):
        m = orig_mel(*args, **kw)
        rec["mel"] = np.array(m)
        return m

    def enc_hook(self, x):
        y = orig_enc(self, x)
        rec["enc"].append(np.array(y.astype(mx.float32)))
        return y

    def logits_hook(self, tokens, audio_features):
        y = orig_logits(self, tokens, audio_features)
        rec["logits"][-1].append(np.array(y[:, -1]))
        return y

    def run_hook(self, mel):
        rec["logits"].append([])
        res = orig_run(self, mel)
        rec["tokens"].append([int(t) for t in res[0].tokens])
        rec["temps"].append(float(self.options.temperature))
        rec["rows"].append(int(self.n_group))
        return res

    mwt.log_mel_spectrogram = mel_hook
    decoding.Inference.logits = logits_hook
    whisper.AudioEncoder.__call__ = enc_hook
    decoding.DecodingTask.run = run_hook
    clips = list(a.clips)
    if a.concat:
        cname, _, joined = a.concat.partition("=")
        parts = []
        for clip in joined.split(","):
            with wave.open(clip) as f:
                parts.append(f.readframes(f.getnframes()))
        path = os.path.join(a.out, cname + ".wav")
        with wave.open(path, "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(16000)
            f.writeframes((b"\0\0" * 32000).join(parts))
        clips.append(path)
    for t in a.tile:
        tname, _, spec = t.partition("=")
        clip, secs, n = spec.split(",")
        with wave.open(clip) as f:
            head = f.readframes(int(float(secs) * f.getframerate()))
        path = os.path.join(a.out, tname + ".wav")
        with wave.open(path, "wb") as f:
            f.setnchannels(1)
            f.setsampwidth(2)
            f.setframerate(16000)
            f.writeframes(head * int(n))
        clips.append(path)
    runs = [(os.path.splitext(os.path.basename(c))[0], c, True, None) for c in clips]
    runs += [(n, c, False, None) for n, _, c in (x.partition("=") for x in a.fp32)]
    for x in a.best_of:
        bname, _, spec = x.partition("=")
        clip, n = spec.rsplit(",", 1)
        runs.append((bname, clip, True, int(n)))
    index = {}
    for name, clip, fp16, best_of in runs:
        rec.clear()
        rec.update(enc=[], logits=[], tokens=[], temps=[], rows=[])
        audio = load_wav(clip)
        # ModelHolder caches the model by path alone; its dtype (the mask's and
        # the encoder positions') must follow fp16. Building the model draws
        # its random initial weights from MLX's global key, so it is loaded
        # first and the seed set after: mlxgo's --seed N is mx.random.seed(N)
        # with the model loaded, right before transcribe().
        mwt.ModelHolder.model = None
        mwt.ModelHolder.get_model(mdir, mx.float16 if fp16 else mx.float32)
        mx.random.seed(0)
        extra = dict(best_of=best_of) if best_of else {}
        result = mlx_whisper.transcribe(audio, path_or_hf_repo=mdir, verbose=None, fp16=fp16, **extra)
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        rec["mel"].astype(np.float32).tofile(os.path.join(d, "mel.f32"))
        for i, e in enumerate(rec["enc"]):
            e.astype(np.float32).tofile(os.path.join(d, f"enc{i}.f32"))
        for i, steps in enumerate(rec["logits"]):
            np.stack(steps).astype(np.float32).tofile(os.path.join(d, f"logits{i}.f32"))
        out = dict(
            clip=os.path.abspath(clip),
            mel_frames=int(rec["mel"].shape[0]),
            decodings=[dict(tokens=t, temperature=tp, steps=len(s), rows=r) for t, tp, s, r in zip(rec["tokens"], rec["temps"], rec["logits"], rec["rows"])],
            text=result["text"],
            segments=[{k: s[k] for k in ("id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob")} for s in result["segments"]],
            compile=a.compile,
            fp16=fp16,
            best_of=best_of,
        )
        with open(os.path.join(d, "result.json"), "w") as f:
            json.dump(out, f, indent=1)
        index[name] = os.path.join(name, "result.json")
        print(f"{name}: {len(rec['tokens'])} decodings, text {result['text']!r}")
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(dict(mlx=mx.__version__, mlx_whisper=mlx_whisper.__version__, clips=index), f, indent=1)


if __name__ == "__main__":
    main()
