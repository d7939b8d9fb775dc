"""make bench-transcribe: mlxgo transcribe against mlx-whisper 0.4.3 on the same libmlx and
faster-whisper (CTranslate2 on the CPU) with compute types float32 and int8.

Same weights (tiny.en: CT2 for mlxgo and faster-whisper, the oracle's conversion of it for
mlx-whisper), same clips, same settings (greedy, temperature fallback, timestamps, English, no
VAD: each engine's defaults for those); one process per run, the sides in a rotating order
(round r starts at side r), --rounds rounds; medians of the wall time of the whole process and of
the transcription alone (mlxgo's --verbose figure; for the Python engines the time around
transcribe() after the model is loaded), the real-time factor, and each peer's ratio to mlxgo
(peer time / mlxgo time: above 1, mlxgo is faster). Besides the given clips, --long SECONDS
synthesizes a clip of that length with espeak-ng and sox: sentences in a few voices and speeds,
1 to 4 s of silence apart, 16 kHz mono. The machine, its load before and after, and every
engine's version go into the report.

Run from the whisper venv: python testdata/whisper_bench.py --mlxgo ./mlxgo
  --ct2 DIR --mlx-model DIR [--rounds 3] [--long 300] [--json OUT] CLIP.wav...
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
import wave

SIDES = ["mlxgo", "mlx-whisper", "faster-whisper-float32", "faster-whisper-int8"]

# The synthesized clip's text: plain sentences of ordinary length, read in turn.
SENTENCES = [
    "The train to the coast leaves at seven in the morning and arrives a little after noon.",
    "Please remember to water the plants on the balcony while we are away.",
    "Our library opens late on Thursdays, so you can return the books after work.",
    "The weather report said that the rain would clear by the afternoon.",
    "He wrote the numbers down carefully, then checked them a second time.",
    "A small boat drifted slowly across the lake as the sun went down.",
    "The committee will meet again next week to discuss the new budget.",
    "She asked whether the museum would be open on the public holiday.",
    "Bread, cheese and a few apples were all they carried for the long walk.",
    "The old bridge was closed for repairs, so the traffic took the longer road.",
    "If the printer runs out of paper, there is more in the cupboard by the door.",
    "The children built a tall tower of blocks and laughed when it fell over.",
    "Every evening the baker sets aside the loaves that did not sell.",
    "The concert began with a quiet piece for piano and strings.",
    "We counted forty two birds on the wire outside the kitchen window.",
    "The letter arrived three days late, but the news in it was good.",
    "Turn left at the second light and the station is on your right.",
    "The students handed in their reports at the end of the lesson.",
    "A cold wind came down from the hills and the shutters rattled all night.",
    "The recipe calls for two eggs, a cup of flour and a pinch of salt.",
]
VOICES = [("en-us", 160), ("en", 150), ("en-us+f3", 170), ("en+m3", 140)]


def synthesize(seconds, out):
    """A clip of exactly `seconds` s: espeak-ng sentences, sox to 16 kHz mono s16, silences between."""
    with tempfile.TemporaryDirectory() as tmp:
        parts, total, i = [], 0.0, 0
        while total < seconds:
            voice, speed = VOICES[i % len(VOICES)]
            raw, part = os.path.join(tmp, f"{i}.raw.wav"), os.path.join(tmp, f"{i}.wav")
            subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-w", raw, SENTENCES[i % len(SENTENCES)]], check=True)
            gap = 1 + (i * 7 % 4)  # 1, 4, 3, 2 s of silence after it, in turn
            subprocess.run(["sox", raw, "-r", "16000", "-c", "1", "-b", "16", part, "pad", "0", str(gap)], check=True)
            with wave.open(part) as f:
                total += f.getnframes() / f.getframerate()
            parts.append(part)
            i += 1
        subprocess.run(["sox", *parts, out, "trim", "0", str(seconds)], check=True)
    return out


def child_mlx(mlx_model, clip, compile_):
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


def child_faster(ct2, clip, compute_type):
    """One faster-whisper run (greedy, as the others), in its own process."""
    for name in ("av", "huggingface_hub"):  # imported at module load, not called (whisper_faster.py)
        sys.modules.setdefault(name, types.ModuleType(name))
    import faster_whisper
    import numpy as np

    t0 = time.perf_counter()
    with wave.open(clip) as f:
        x = np.frombuffer(f.readframes(f.getnframes()), np.int16).astype(np.float32) / 32768.0
    model = faster_whisper.WhisperModel(ct2, device="cpu", compute_type=compute_type, cpu_threads=os.cpu_count() or 1)
    t1 = time.perf_counter()
    segments, _ = model.transcribe(x, language="en", beam_size=1, best_of=1, vad_filter=False, word_timestamps=False)
    text = "".join(s.text for s in segments)  # the generator decodes as it is consumed
    t2 = time.perf_counter()
    print(json.dumps(dict(load_s=t1 - t0, transcribe_s=t2 - t1, text=text)))


def versions(mlxgo):
    out = dict(python=platform.python_version())
    v = subprocess.run([mlxgo, "version"], capture_output=True, text=True)
    out["mlxgo"] = (v.stdout or v.stderr).strip()
    c = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    out["commit"] = c.stdout.strip()
    code = ("import sys, types\n"
            "for n in ('av', 'huggingface_hub'): sys.modules.setdefault(n, types.ModuleType(n))\n"
            "import json, mlx.core as mx, ctranslate2, faster_whisper, importlib.metadata as m\n"
            "print(json.dumps(dict(mlx=mx.__version__, mlx_whisper=m.version('mlx-whisper'),"
            " faster_whisper=faster_whisper.__version__, ctranslate2=ctranslate2.__version__)))")
    out.update(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout))
    for tool in ("espeak-ng", "sox"):
        r = subprocess.run([tool, "--version"], capture_output=True, text=True)
        out[tool] = (r.stdout or r.stderr).strip().splitlines()[0]
    return out


def machine():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return dict(node=os.uname().nodename, cpu=cpu, cpus=os.cpu_count(), kernel=os.uname().release)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_side(a, side, clip, env):
    t0 = time.perf_counter()
    if side == "mlxgo":
        p = subprocess.run([a.mlxgo, "transcribe", "-m", a.ct2, "--verbose", "--format", "json", clip],
                           capture_output=True, text=True, env=env, check=True)
        m = re.search(r"transcribed [0-9.]+ s of audio in ([0-9.]+) s", p.stderr)
        tr, text = float(m.group(1)), json.loads(p.stdout)["text"]
    else:
        me = os.path.abspath(__file__)
        if side == "mlx-whisper":
            cmd = [sys.executable, me, "--child-mlx", a.mlx_model, clip] + (["--no-compile"] if a.no_compile else [])
        else:
            cmd = [sys.executable, me, "--child-faster", a.ct2, clip, side.rsplit("-", 1)[1]]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        tr, text = out["transcribe_s"], out["text"]
    return dict(wall_s=time.perf_counter() - t0, transcribe_s=tr), text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child-mlx", nargs=2, metavar=("MLX_MODEL", "CLIP"))
    ap.add_argument("--child-faster", nargs=3, metavar=("CT2", "CLIP", "COMPUTE_TYPE"))
    ap.add_argument("--mlxgo", default="./mlxgo")
    ap.add_argument("--ct2")
    ap.add_argument("--mlx-model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--start-round", type=int, default=0, help="number the rounds from here (another run's order goes on)")
    ap.add_argument("--long", type=int, default=0, help="also a clip of this many seconds synthesized with espeak-ng and sox")
    ap.add_argument("--no-compile", action="store_true", help="mlx-whisper with mx.compile off (default: on, as it runs)")
    ap.add_argument("--json")
    ap.add_argument("clips", nargs="*")
    a = ap.parse_args()
    if a.child_mlx:
        child_mlx(a.child_mlx[0], a.child_mlx[1], not a.no_compile)
        return
    if a.child_faster:
        child_faster(*a.child_faster)
        return
    report = dict(rounds=a.rounds, mlx_whisper_compile=not a.no_compile, machine=machine(), versions=versions(a.mlxgo),
                  loadavg_before=loadavg(), rows=[])
    print(json.dumps({k: report[k] for k in ("machine", "versions", "loadavg_before")}), flush=True)
    clips = list(a.clips)
    if a.long:
        clips.append(synthesize(a.long, os.path.join(os.path.dirname(os.path.abspath(a.json or ".")), f"synth-{a.long}s.wav")))
    env = dict(os.environ, MLX_ENABLE_TF32="0")
    for clip in clips:
        with wave.open(clip) as f:
            secs = f.getnframes() / f.getframerate()
        res = {s: [] for s in SIDES}
        texts = {}
        for r in range(a.start_round, a.start_round + a.rounds):
            for side in SIDES[r % len(SIDES):] + SIDES[: r % len(SIDES)]:
                run, texts[side] = run_side(a, side, clip, env)
                res[side].append(run)
                print(f"{os.path.basename(clip)} round {r} {side}: {run['transcribe_s']:.2f} s transcribing, "
                      f"{run['wall_s']:.2f} s wall, load {loadavg()}", file=sys.stderr, flush=True)
        row = dict(clip=os.path.basename(clip), audio_s=round(secs, 2),
                   same_text={s: texts[s] == texts["mlxgo"] for s in SIDES[1:]})
        for side, runs in res.items():
            row[side] = dict(
                wall_s=round(statistics.median(x["wall_s"] for x in runs), 3),
                transcribe_s=round(statistics.median(x["transcribe_s"] for x in runs), 3),
            )
            row[side]["rtf"] = round(row[side]["transcribe_s"] / secs, 4)
        row["ratio_transcribe"] = {s: round(row[s]["transcribe_s"] / row["mlxgo"]["transcribe_s"], 3) for s in SIDES[1:]}
        row["ratio_wall"] = {s: round(row[s]["wall_s"] / row["mlxgo"]["wall_s"], 3) for s in SIDES[1:]}
        row["loadavg"] = loadavg()
        report["rows"].append(row)
        print(json.dumps(row), flush=True)
    report["loadavg_after"] = loadavg()
    print("\n| clip | audio s | " + " | ".join(f"{s} s (RTF)" for s in SIDES) + " | " + " | ".join(f"{s} / mlxgo" for s in SIDES[1:]) + " |")
    print("|---" * (2 + 2 * len(SIDES) - 1) + "|")
    for row in report["rows"]:
        cells = [row["clip"], f"{row['audio_s']:g}"]
        cells += [f"{row[s]['transcribe_s']:.2f} ({row[s]['rtf']:.3f})" for s in SIDES]
        cells += [f"{row['ratio_transcribe'][s]:.2f}x" for s in SIDES[1:]]
        print("| " + " | ".join(cells) + " |")
    print(f"load average before {report['loadavg_before']}, after {report['loadavg_after']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
