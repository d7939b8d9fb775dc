"""faster-whisper (CTranslate2 on the CPU) on the same CT2 tiny.en weights as mlxgo: the
independent engine of issue 12. Greedy (beam_size 1; --beam-size N: CTranslate2's beam search,
--patience P), OpenAI's fallback defaults, no VAD, no word timestamps; the text and segments of
each clip go to OUT/<name>.json for models/whisper's TestL1AgainstMLXWhisper (greedy) and
TestBeamSearchAgainstFasterWhisper (beams).

faster-whisper imports PyAV (audio decoding) and huggingface_hub (downloads) at module load;
given a float32 array and a local directory it calls neither, so they are stood in for here,
as whisper_oracle.py does for mlx-whisper's.

  python testdata/whisper_faster.py --model DIR --out DIR [--compute-type float32] [--beam-size N] CLIP.wav...
"""

import argparse
import json
import os
import sys
import types
import wave

for name in ("av", "huggingface_hub"):
    sys.modules.setdefault(name, types.ModuleType(name))

import ctranslate2  # noqa: E402
import faster_whisper  # noqa: E402
import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compute-type", default="float32")
    ap.add_argument("--beam-size", type=int, default=1)
    ap.add_argument("--patience", type=float, default=1.0)
    ap.add_argument("clips", nargs="+")
    a = ap.parse_args()
    model = faster_whisper.WhisperModel(a.model, device="cpu", compute_type=a.compute_type, cpu_threads=os.cpu_count() or 1)
    os.makedirs(a.out, exist_ok=True)
    for clip in a.clips:
        with wave.open(clip) as f:
            assert f.getframerate() == 16000 and f.getnchannels() == 1 and f.getsampwidth() == 2, clip
            x = np.frombuffer(f.readframes(f.getnframes()), np.int16).astype(np.float32) / 32768.0
        segments, info = model.transcribe(x, language="en", beam_size=a.beam_size, patience=a.patience, best_of=1,
                                          vad_filter=False, word_timestamps=False)
        segs = [dict(start=s.start, end=s.end, text=s.text, tokens=list(s.tokens)) for s in segments]
        name = os.path.splitext(os.path.basename(clip))[0]
        out = dict(clip=os.path.abspath(clip), text="".join(s["text"] for s in segs), segments=segs,
                   faster_whisper=faster_whisper.__version__, ctranslate2=ctranslate2.__version__, compute_type=a.compute_type,
                   beam_size=a.beam_size, patience=a.patience)
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(out, f, indent=1)
        print(f"{name}: {out['text']!r}")


if __name__ == "__main__":
    main()
