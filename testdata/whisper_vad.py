"""The Silero VAD oracle for models/silero (issue 12): onnxruntime runs
silero_vad_v5.onnx frame by frame as silero-vad's OnnxWrapper feeds it (64
samples of context before each 512-sample frame, the LSTM state carried), and
silero-vad 5.1.2's own get_speech_timestamps (its source, read from the pinned
wheel) cuts the speech segments with its defaults. Per clip, OUT/<name>.json
holds {"clip", "samples", "probs", "segments": [[start, end]...]}.

get_speech_timestamps is written against torch; it only needs torch.is_tensor,
torch.Tensor and torch.nn.functional.pad here, so a numpy stand-in for torch
(and an empty torchaudio) lets its source run unchanged without a 700 MB torch.

  python testdata/whisper_vad.py --onnx FILE --silero-wheel WHL --out DIR CLIP.wav...
"""

import argparse
import json
import os
import sys
import types
import wave
import zipfile

import numpy as np
import onnxruntime


def numpy_torch():
    torch = types.ModuleType("torch")
    torch.is_tensor = lambda x: isinstance(x, np.ndarray)
    torch.Tensor = lambda x: np.asarray(x, np.float32)
    torch.Tensor.__name__ = "Tensor"
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    functional.pad = lambda x, p: np.pad(x, (p[0], p[1]))
    nn.functional = functional
    torch.nn = nn
    torch.no_grad = lambda: (lambda f: f)
    # utils_vad's default arguments and decorators name these.
    torch.jit = types.SimpleNamespace(script=lambda f: f)
    torch.device = lambda name: name
    sys.modules.update({"torch": torch, "torch.nn": nn, "torch.nn.functional": functional,
                        "torchaudio": types.ModuleType("torchaudio")})


class Wrapper:
    """OnnxWrapper.__call__ at 16 kHz, batch 1, in numpy."""

    def __init__(self, path):
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=opts)
        self.reset_states()

    def reset_states(self, batch_size=1):
        self.state = np.zeros((2, batch_size, 128), np.float32)
        self.context = np.zeros((batch_size, 64), np.float32)
        self.probs = []

    def __call__(self, x, sr):
        assert sr == 16000 and x.shape[-1] == 512
        x = np.concatenate([self.context, x.astype(np.float32)[None, :]], axis=1)
        out, self.state = self.session.run(None, {"input": x, "state": self.state, "sr": np.array(sr, np.int64)})
        self.context = x[..., -64:]
        self.probs.append(float(out[0, 0]))
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--silero-wheel", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("clips", nargs="+")
    a = ap.parse_args()
    numpy_torch()
    src = zipfile.ZipFile(a.silero_wheel).read("silero_vad/utils_vad.py").decode()
    utils = types.ModuleType("silero_utils_vad")
    exec(compile(src, "silero_vad/utils_vad.py", "exec"), utils.__dict__)
    model = Wrapper(a.onnx)
    os.makedirs(a.out, exist_ok=True)
    index = {}
    for clip in a.clips:
        with wave.open(clip) as f:
            assert f.getframerate() == 16000 and f.getnchannels() == 1 and f.getsampwidth() == 2, clip
            x = np.frombuffer(f.readframes(f.getnframes()), np.int16).astype(np.float32) / 32768.0
        speeches = utils.get_speech_timestamps(x, model)
        name = os.path.splitext(os.path.basename(clip))[0]
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(dict(clip=os.path.abspath(clip), samples=len(x), probs=model.probs,
                           segments=[[s["start"], s["end"]] for s in speeches]), f)
        index[name] = name + ".json"
        print(f"{name}: {len(model.probs)} frames, {len(speeches)} segments {[(s['start'], s['end']) for s in speeches]}")
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(dict(onnxruntime=onnxruntime.__version__, clips=index), f, indent=1)


if __name__ == "__main__":
    main()
