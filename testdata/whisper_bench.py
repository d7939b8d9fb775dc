"""make bench-transcribe: mlxgo transcribe against mlx-whisper 0.4.3 on the same libmlx.

Same weights (tiny.en: CT2 for mlxgo, the oracle's conversion of it for mlx-whisper),
same clips, same settings (greedy, mlx-whisper's defaults); one process per run, the
two sides alternating A B A B for --rounds rounds; medians of the wall time of the
whole process and of the transcription alone (mlxgo's --verbose figure; for
mlx-whisper the time around transcribe() after a warm-up load), the real-time factor,
and the ratio mlx-whisper / mlxgo (above 1: mlxgo is faster). Besides the given clips,
--long SECONDS builds a clip of that length from them (2 s of silence apart).

Run from the whisper venv: python testdata/whisper_bench.py --mlxgo ./mlxgo
  --ct2 DIR --mlx-model DIR [--rounds 3] [--long 300] [--json OUT] CLIP.wav...
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import wave


def child(mlx_model, clip, compile_):
    """One mlx-whisper run, in its own process: load, transcribe, report."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import whisper_oracle as wo  # the stand-ins for numba, scipy.signal, huggingface_hub

    mx = wo.mx
    if not compile_:
        mx.disable_compile()
    t0 = time.perf_counter()
    audio = wo.load_wav(clip)
    wo.mwt.ModelHolder.get_model(mlx_model, mx.float16)
    t1 = time.perf_counter()
    r = wo.mlx_whisper.transcribe(audio, path_or_hf_repo=mlx_model, verbose=None)
    t2 = time.perf_counter()
    print(json.dumps(dict(load_s=t1 - t0, transcribe_s=t2 - t1, text=r["text"])))


def join_clips(clips, seconds, out):
    parts = []
    for c in clips:
        with wave.open(c) as f:
            assert f.getframerate() == 16000 and f.getnchannels() == 1 and f.getsampwidth() == 2, c
            parts.append(f.readframes(f.getnframes()))
    gap = b"\0\0" * 32000
    data = b""
    while len(data) < seconds * 32000:
        for p in parts:
            data += p + gap
    with wave.open(out, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(data[: seconds * 32000])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, metavar=("MLX_MODEL", "CLIP"))
    ap.add_argument("--mlxgo", default="./mlxgo")
    ap.add_argument("--ct2")
    ap.add_argument("--mlx-model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--long", type=int, default=0)
    ap.add_argument("--no-compile", action="store_true", help="mlx-whisper with mx.compile off (default: on, as it runs)")
    ap.add_argument("--json")
    ap.add_argument("clips", nargs="*")
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], not a.no_compile)
        return
    clips = list(a.clips)
    if a.long:
        clips.append(join_clips(a.clips, a.long, os.path.join(os.path.dirname(os.path.abspath(a.json or ".")), f"long-{a.long}s.wav")))
    env = dict(os.environ, MLX_ENABLE_TF32="0")
    rows = []
    for clip in clips:
        with wave.open(clip) as f:
            secs = f.getnframes() / f.getframerate()
        res = {"mlxgo": [], "mlx-whisper": []}
        texts = {}
        for r in range(a.rounds):
            order = ["mlxgo", "mlx-whisper"] if r % 2 == 0 else ["mlx-whisper", "mlxgo"]
            for side in order:
                t0 = time.perf_counter()
                if side == "mlxgo":
                    p = subprocess.run([a.mlxgo, "transcribe", "-m", a.ct2, "--verbose", "--format", "json", clip],
                                       capture_output=True, text=True, env=env, check=True)
                    m = re.search(r"transcribed [0-9.]+ s of audio in ([0-9.]+) s", p.stderr)
                    tr = float(m.group(1))
                    texts[side] = json.loads(p.stdout)["text"]
                else:
                    cmd = [sys.executable, os.path.abspath(__file__), "--child", a.mlx_model, clip]
                    if a.no_compile:
                        cmd.append("--no-compile")
                    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
                    out = json.loads(p.stdout.strip().splitlines()[-1])
                    tr = out["transcribe_s"]
                    texts[side] = out["text"]
                res[side].append(dict(wall_s=time.perf_counter() - t0, transcribe_s=tr))
        row = dict(clip=os.path.basename(clip), audio_s=round(secs, 2), same_text=texts["mlxgo"] == texts["mlx-whisper"])
        for side, runs in res.items():
            row[side] = dict(
                wall_s=round(statistics.median(x["wall_s"] for x in runs), 3),
                transcribe_s=round(statistics.median(x["transcribe_s"] for x in runs), 3),
            )
            row[side]["rtf"] = round(row[side]["transcribe_s"] / secs, 4)
        row["speedup_transcribe"] = round(row["mlx-whisper"]["transcribe_s"] / row["mlxgo"]["transcribe_s"], 3)
        row["speedup_wall"] = round(row["mlx-whisper"]["wall_s"] / row["mlxgo"]["wall_s"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = dict(rounds=a.rounds, mlx_whisper_compile=not a.no_compile, machine=os.uname().nodename, cpus=os.cpu_count(), rows=rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
