"""Checks mlxgo serve's /v1/embeddings with the official openai client (run by
TestEmbeddingsOpenAIClient).

Usage: openai_embeddings.py BASE_URL API_KEY WANT_JSON, where WANT_JSON holds
{"texts": [...], "vectors": [[float32...]...], "ids": [token ids of texts[0]]}
as models/embed computed them. Exits non-zero on the first failed check.
"""
import json
import sys

import numpy as np
import openai

base, key, want_path = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0)
want = json.load(open(want_path))
texts = want["texts"]
vectors = np.array(want["vectors"], dtype=np.float32)


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


def same_bits(got, ref):
    got = np.asarray(got, dtype=np.float32)
    return got.shape == ref.shape and np.array_equal(got.view(np.uint32), ref.view(np.uint32))


# The client asks for base64 when no format is given and decodes it itself.
r = client.embeddings.create(model="all-minilm-l6-v2", input=texts)
check("default (base64) vectors", same_bits([d.embedding for d in r.data], vectors))
check("indices in order", [d.index for d in r.data] == list(range(len(texts))))
check("object and model", r.object == "list" and r.model == "all-minilm-l6-v2", f"{r.object} {r.model}")
check("usage", r.usage.prompt_tokens > len(texts) and r.usage.total_tokens == r.usage.prompt_tokens, str(r.usage))
check("x_mlxgo", (r.model_extra or {}).get("x_mlxgo", {}).get("pooling") == "mean", str(r.model_extra))

f = client.embeddings.create(model="all-minilm-l6-v2", input=texts, encoding_format="float")
check("float vectors", same_bits([d.embedding for d in f.data], vectors))

one = client.embeddings.create(model="all-minilm-l6-v2", input=texts[0])
check("one string", len(one.data) == 1 and same_bits([one.data[0].embedding], vectors[:1]))

ids = client.embeddings.create(model="all-minilm-l6-v2", input=[want["ids"]], encoding_format="float")
check("token ids", same_bits([ids.data[0].embedding], vectors[:1]))


def raises(name, exc, fn):
    try:
        fn()
    except exc as e:
        check(name, True, str(e)[:120])
        return
    except Exception as e:  # noqa: BLE001  (the wrong exception type is the failure)
        check(name, False, f"raised {type(e).__name__}: {e}")
    check(name, False, "no exception")


raises("dimensions on MiniLM -> BadRequestError", openai.BadRequestError,
       lambda: client.embeddings.create(model="all-minilm-l6-v2", input="a", dimensions=64))
raises("empty input -> BadRequestError", openai.BadRequestError,
       lambda: client.embeddings.create(model="all-minilm-l6-v2", input=[]))
raises("too long -> BadRequestError", openai.BadRequestError,
       lambda: client.embeddings.create(model="all-minilm-l6-v2", input=["a", "word " * 600]))
bad = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
raises("bad key -> AuthenticationError", openai.AuthenticationError,
       lambda: bad.embeddings.create(model="all-minilm-l6-v2", input="a"))
print("all embeddings checks passed")
