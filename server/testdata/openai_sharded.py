"""Checks mlxgo serve --shard with the official openai client (run by TestServeSharded).

Usage: openai_sharded.py ONE_RANK_URL SHARDED_URL PARALLELISM. Sends the same 8
requests, all at once, to a one-process server and to a distributed one (rank 0
of `mlxgo launch -n 2 -- serve --shard ... --batch 4`), streamed and not, greedy
and seeded, with and without stop strings, and requires the same choices from
both. Exits non-zero on the first failed check.
"""
import sys
from concurrent.futures import ThreadPoolExecutor

import openai

one_url, sharded_url, parallelism = sys.argv[1], sys.argv[2], sys.argv[3]
PROMPT = [101, 7, 300, 42, 99, 5, 411, 8, 256, 17, 63, 2]


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


def requests():
    out = []
    for i in range(8):
        kw = dict(model="tiny", prompt=PROMPT[i:] + [i + 1] * i, max_tokens=8 + 3 * i, temperature=0)
        if i % 3 == 1:
            kw["stop"] = ["3"]  # a stop string: rank 0 ends the row, the others follow
        if i % 4 == 3:
            kw.update(temperature=0.9, seed=11 + i)
        if i == 5:
            kw["logprobs"] = 2  # read back on every rank: it changes the graph
        out.append((i % 2 == 0, kw))
    return out


def run(url):
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)

    def one(req):
        stream, kw = req
        if not stream:
            r = client.completions.create(**kw)
            return r.choices[0].text, r.choices[0].finish_reason, (r.model_extra or {}).get("x_mlxgo", {})
        text, finish = "", None
        for ch in client.completions.create(stream=True, **kw):
            if ch.choices:
                text += ch.choices[0].text
                finish = ch.choices[0].finish_reason or finish
        return text, finish, None

    with ThreadPoolExecutor(8) as ex:
        return list(ex.map(one, requests()))


one = run(one_url)
sharded = run(sharded_url)
for i, (a, b) in enumerate(zip(one, sharded)):
    check(f"request {i}: same text and finish as one process", a[:2] == b[:2], f"{a[:2]!r} vs {b[:2]!r}")
# Again: the prompt cache now holds the prompts (and what was generated) on
# every rank alike, and the rows start from it.
again = run(sharded_url)
for i, (a, b) in enumerate(zip(one, again)):
    check(f"request {i} again: same text and finish from the prompt cache", a[:2] == b[:2], f"{a[:2]!r} vs {b[:2]!r}")
cached = [b[2].get("cached_tokens", 0) for b in again if b[2] is not None]
check("prompt cache hits", max(cached) > 0, repr(cached))
stops = [b[1] for i, b in enumerate(sharded) if i % 3 == 1]
check("stop strings end rows", "stop" in stops, repr(stops))
x = [b[2] for b in sharded if b[2] is not None]
check("x_mlxgo.parallelism", all(e.get("parallelism") == parallelism for e in x), repr([e.get("parallelism") for e in x]))
check("x_mlxgo.scheduling continuous", all(e.get("scheduling") == "continuous" for e in x), repr(x[0]))
check("rows batched together", max(e.get("batch_rows", 0) for e in x) > 1, repr([e.get("batch_rows") for e in x]))
models = openai.OpenAI(base_url=sharded_url, api_key="none", max_retries=0).models.list()
p = (models.data[0].model_extra or {}).get("x_mlxgo", {}).get("parallelism", {})
check("/v1/models parallelism", p.get("kind") == parallelism.split()[0] and p.get("size") == 2 and p.get("backend") == "ring", repr(p))
import urllib.request  # noqa: E402

metrics = urllib.request.urlopen(sharded_url.removesuffix("/v1") + "/metrics").read().decode()
check("/metrics mlxgo_parallel_ranks", "\nmlxgo_parallel_ranks 2\n" in metrics, [l for l in metrics.splitlines() if "parallel" in l])
