"""Checks mlxgo serve's /v1/audio/transcriptions with the official openai client
(run by TestAudioOpenAIClient).

Usage: openai_audio.py BASE_URL API_KEY WANT_JSON, where WANT_JSON holds what
models/whisper gives for the clip alone: {"clip", "text", "segments",
"duration", "prompted_srt"} (srt of the prompted transcription). Exits non-zero on the first failed check.
"""
import json
import sys

import openai

base, key, want_path = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0)
want = json.load(open(want_path))
MODEL = "whisper-tiny.en"


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


def create(**kw):
    with open(want["clip"], "rb") as f:
        return client.audio.transcriptions.create(model=MODEL, file=f, **kw)


r = create()
check("json (default) text", r.text == want["text"], repr(r.text))
check("x_mlxgo", (r.model_extra or {}).get("x_mlxgo", {}).get("windows") == 1, str(r.model_extra)[:200])

v = create(response_format="verbose_json", timestamp_granularities=["segment"])
check("verbose_json text", v.text == want["text"], repr(v.text))
check("verbose_json language and duration", v.language == "english" and v.duration == want["duration"], f"{v.language} {v.duration}")
got = [s.model_dump() for s in v.segments]
keys = ("id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob", "compression_ratio", "no_speech_prob")
check("verbose_json segments", [{k: s[k] for k in keys} for s in got] == [{k: s[k] for k in keys} for s in want["segments"]],
      f"{len(got)} segments, want {len(want['segments'])}")

s = create(response_format="srt", prompt="Fellow citizens.", temperature=0.0)
check("srt with a prompt", isinstance(s, str) and s == want["prompted_srt"], repr(s[:80]))

ids = [m.id for m in client.models.list().data]
check("models lists the whisper model", MODEL in ids, str(ids))


def raises(name, exc, fn):
    try:
        fn()
    except exc as e:
        check(name, True, str(e)[:120])
        return
    except Exception as e:  # noqa: BLE001  (the wrong exception type is the failure)
        check(name, False, f"raised {type(e).__name__}: {e}")
    check(name, False, "no exception")


def translate():
    with open(want["clip"], "rb") as f:
        return client.audio.translations.create(model=MODEL, file=f)


raises("translations on an English-only model -> BadRequestError", openai.BadRequestError, translate)
w = create(response_format="verbose_json", timestamp_granularities=["word"])
words = w.words or []
check("word timestamps: one word each", [x.word for x in words] == want["text"].split(), str([x.word for x in words]))
check("word timestamps: times in order, within the clip",
      all(0 <= x.start <= x.end <= w.duration for x in words) and all(a.start <= b.start for a, b in zip(words, words[1:])),
      str([(x.start, x.end) for x in words]))
raises("word timestamps without verbose_json -> BadRequestError", openai.BadRequestError,
       lambda: create(response_format="json", timestamp_granularities=["word"]))
raises("response_format tsv -> BadRequestError", openai.BadRequestError, lambda: create(response_format="tsv"))
bad = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
raises("bad key -> AuthenticationError", openai.AuthenticationError,
       lambda: bad.audio.transcriptions.create(model=MODEL, file=open(want["clip"], "rb")))
print("all audio checks passed")
