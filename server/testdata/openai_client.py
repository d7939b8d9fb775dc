"""Checks mlxgo serve with the official openai client (run by TestOpenAIClient).

Usage: openai_client.py BASE_URL API_KEY. Exits non-zero on the first failed
check. Requests are short (the CPU backend decodes ~5 tok/s).
"""
import sys

import openai

base, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0)
MSG = [{"role": "user", "content": "Name a colour."}]


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


# Chat, not streamed: text, finish reason, usage with cached tokens.
r = client.chat.completions.create(model="smollm2", messages=MSG, max_tokens=4)
c = c0 = r.choices[0]
check("chat text", c.message.role == "assistant" and len(c.message.content) > 0, repr(c.message.content))
check("chat finish_reason", c.finish_reason in ("stop", "length"), c.finish_reason)
u = r.usage
check("chat usage", u.completion_tokens <= 4 and u.total_tokens == u.prompt_tokens + u.completion_tokens, str(u))
check("usage cached_tokens present", u.prompt_tokens_details is not None and u.prompt_tokens_details.cached_tokens >= 0)
check("x_mlxgo", (r.model_extra or {}).get("x_mlxgo", {}).get("scheduling") == "serial", str(r.model_extra))

# Chat, streamed, with usage: the text equals the non-streamed greedy text.
chunks = list(client.chat.completions.create(model="smollm2", messages=MSG, max_tokens=4, stream=True,
                                             stream_options={"include_usage": True}))
text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
check("stream equals non-stream (greedy)", text == c.message.content, f"{text!r} vs {c.message.content!r}")
check("stream usage chunk", chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == u.completion_tokens)
check("stream reuses the prompt cache", chunks[-1].usage.prompt_tokens_details.cached_tokens > 0)

# Completions with a stop string: the stop string is never in the text.
full = client.completions.create(model="smollm2", prompt="1, 2, 3, 4,", max_tokens=6)
check("completion text", len(full.choices[0].text) > 0, repr(full.choices[0].text))
stopped = client.completions.create(model="smollm2", prompt="1, 2, 3, 4,", max_tokens=6, stop=["6"])
check("completion stop", "6" not in stopped.choices[0].text and stopped.choices[0].finish_reason in ("stop", "length"),
      repr(stopped.choices[0].text))
streamed = "".join(ch.choices[0].text for ch in client.completions.create(
    model="smollm2", prompt="1, 2, 3, 4,", max_tokens=6, stop=["6"], stream=True) if ch.choices)
check("completion stop streamed", streamed == stopped.choices[0].text, f"{streamed!r} vs {stopped.choices[0].text!r}")

# Seeded sampling is reproducible.
a = client.completions.create(model="smollm2", prompt="Once upon", max_tokens=5, temperature=1.0, seed=7)
b = client.completions.create(model="smollm2", prompt="Once upon", max_tokens=5, temperature=1.0, seed=7)
check("seed reproducible", a.choices[0].text == b.choices[0].text, f"{a.choices[0].text!r} vs {b.choices[0].text!r}")

# Errors map to the client's exception types.
def raises(name, exc, fn):
    try:
        fn()
    except exc as e:
        check(name, True, f"{type(e).__name__} {getattr(e, 'status_code', '')}")
        return
    except Exception as e:  # noqa: BLE001
        check(name, False, f"{type(e).__name__}: {e}")
    check(name, False, "no exception")


raises("empty messages -> BadRequestError", openai.BadRequestError,
       lambda: client.chat.completions.create(model="smollm2", messages=[]))
raises("n=0 -> BadRequestError", openai.BadRequestError,
       lambda: client.chat.completions.create(model="smollm2", messages=MSG, n=0))
raises("xtc_probability out of range -> BadRequestError", openai.BadRequestError,
       lambda: client.chat.completions.create(model="smollm2", messages=MSG, extra_body={"xtc_probability": 2}))
r = client.chat.completions.create(model="smollm2", messages=MSG, max_tokens=4, temperature=1, seed=3,
                                   extra_body={"xtc_probability": 0.5, "xtc_threshold": 0.1})
check("xtc sampling answers", r.choices[0].finish_reason in ("stop", "length"), repr(r))
raises("unknown model -> NotFoundError", openai.NotFoundError,
       lambda: client.models.retrieve("gpt-4"))
raises("over context -> BadRequestError", openai.BadRequestError,
       lambda: client.completions.create(model="smollm2", prompt="hi", max_tokens=10**6))
bad = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
raises("bad key -> AuthenticationError", openai.AuthenticationError,
       lambda: bad.models.list())
raises("unknown route -> NotFoundError", openai.NotFoundError,
       lambda: client.get("/nothing", cast_to=object))

# Log-probabilities (greedy: the chosen token is the most likely) and the
# frequency penalty, on the real model.
r = client.chat.completions.create(model="smollm2", messages=MSG, max_tokens=3, logprobs=True, top_logprobs=2,
                                   frequency_penalty=0.5)
lp = r.choices[0].logprobs.content
check("chat logprobs", len(lp) == r.usage.completion_tokens and "".join(e.token for e in lp) == r.choices[0].message.content
      and all(e.logprob <= 0 and e.top_logprobs[0].token == e.token for e in lp), repr(lp))
r = client.completions.create(model="smollm2", prompt="1, 2, 3, 4,", max_tokens=3, logprobs=2)
l = r.choices[0].logprobs
check("completion logprobs", "".join(l.tokens) == r.choices[0].text and len(l.token_logprobs) == 3
      and all(len(t) == 2 for t in l.top_logprobs), repr(l))

# n choices: seeded sampling, choice i draws from seed+i, so choice 1 of a
# request with seed 7 is choice 0 of the same request with seed 8.
r = client.completions.create(model="smollm2", prompt="Once upon", max_tokens=5, temperature=1.0, seed=7, n=2)
r8 = client.completions.create(model="smollm2", prompt="Once upon", max_tokens=5, temperature=1.0, seed=8)
check("n=2 choices", [c.index for c in r.choices] == [0, 1] and r.choices[0].text == a.choices[0].text
      and r.choices[1].text == r8.choices[0].text, repr([c.text for c in r.choices]))
chunks = list(client.chat.completions.create(model="smollm2", messages=MSG, max_tokens=4, n=2, stream=True,
                                             temperature=1.0, seed=3))
per = {}
for ch in chunks:
    for c in ch.choices:
        per[c.index] = per.get(c.index, "") + (c.delta.content or "")
check("n=2 streamed", sorted(per) == [0, 1] and all(per.values()), repr(per))

# mlx_lm.server's paths without /v1 and one model by id.
bare = openai.OpenAI(base_url=base.removesuffix("/v1"), api_key=key, max_retries=0)
r = bare.chat.completions.create(model="smollm2", messages=MSG, max_tokens=4)
check("/chat/completions", r.choices[0].message.content == c0.message.content, repr(r.choices[0].message.content))
m = client.models.retrieve("smollm2")
check("models retrieve", m.id == "smollm2" and m.object == "model")

models = client.models.list()
check("models list", models.data[0].id == "smollm2" and models.data[0].model_extra["x_mlxgo"]["artifact_fingerprint"] != "")
print("all openai client checks passed")
