"""Checks tools, reasoning and logprobs of mlxgo serve with the official openai
client (run by TestOpenAIClientFeatures against a scripted Qwen3-style agent).

Usage: openai_features.py BASE_URL. Exits non-zero on the first failed check.
"""
import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                       "required": ["city"]},
    },
}]
USER = {"role": "user", "content": "Weather in Paris?"}


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


# Tools round trip: a call, then the tool's result, then the answer.
r = client.chat.completions.create(model="agent", messages=[USER], tools=TOOLS)
c = r.choices[0]
calls = c.message.tool_calls or []
check("finish_reason tool_calls", c.finish_reason == "tool_calls", c.finish_reason)
check("one parsed tool call", len(calls) == 1 and calls[0].type == "function" and calls[0].function.name == "get_weather",
      repr(calls))
args = json.loads(calls[0].function.arguments)
check("arguments are a JSON object string", args == {"city": "Paris", "unit": "celsius"}, calls[0].function.arguments)
check("no content beside the call", not c.message.content, repr(c.message.content))
check("reasoning_content", (c.message.model_extra or {}).get("reasoning_content") == "\nI need the weather tool.\n",
      repr(c.message.model_extra))

messages = [USER, c.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps({"temp": 18})}]
r2 = client.chat.completions.create(model="agent", messages=messages, tools=TOOLS)
check("answer after the tool result", r2.choices[0].message.content.strip() == "It is 18°C in Paris."
      and r2.choices[0].finish_reason == "stop", repr(r2.choices[0].message))

# Streaming: the call comes as tool_calls deltas with an index, never as content.
chunks = list(client.chat.completions.create(model="agent", messages=[USER], tools=TOOLS, stream=True))
content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
deltas = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
reasoning = "".join((ch.choices[0].delta.model_extra or {}).get("reasoning_content", "") for ch in chunks if ch.choices)
check("stream: no tool text as content", content.strip() == "", repr(content))
check("stream: tool_calls delta", len(deltas) == 1 and deltas[0].index == 0 and deltas[0].function.name == "get_weather"
      and json.loads(deltas[0].function.arguments)["city"] == "Paris", repr(deltas))
check("stream: reasoning deltas", reasoning == "\nI need the weather tool.\n", repr(reasoning))
check("stream: finish_reason", chunks[-1].choices[0].finish_reason == "tool_calls", repr(chunks[-1]))

# tool_choice we cannot honour is a 400 naming it.
try:
    client.chat.completions.create(model="agent", messages=[USER], tools=TOOLS, tool_choice="required")
    check("tool_choice required refused", False, "no error")
except openai.BadRequestError as e:
    check("tool_choice required refused", e.body.get("param") == "tool_choice", repr(e.body))

# Chat logprobs with alternatives.
r = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "Colour?"}], logprobs=True,
                                   top_logprobs=3)
lp = r.choices[0].logprobs.content
check("one logprob per token", len(lp) == r.usage.completion_tokens, f"{len(lp)} vs {r.usage.completion_tokens}")
text = "".join(e.token for e in lp)
check("tokens spell the output", text.endswith("Blue.") and "<think>" in text, repr(text))
check("bytes match tokens", all(bytes(e.bytes) == e.token.encode() for e in lp))
check("top_logprobs", all(len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token
                          and e.top_logprobs[0].logprob == e.logprob for e in lp))
check("values", [e.logprob for e in lp[:4]] == [0.0, -0.125, -0.25, -0.375], repr([e.logprob for e in lp[:4]]))

streamed = [e for ch in client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "Colour?"}],
                                                       logprobs=True, stream=True)
            if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
check("stream: logprobs for every token", [e.token for e in streamed] == [e.token for e in lp], repr(streamed[:3]))

# Legacy completions logprobs.
r = client.completions.create(model="agent", prompt="Colour?", logprobs=2, max_tokens=5)
l = r.choices[0].logprobs
check("legacy shape", len(l.tokens) == 5 and len(l.token_logprobs) == 5 and len(l.top_logprobs) == 5
      and len(l.text_offset) == 5, repr(l))
check("legacy offsets", l.text_offset == [sum(len(t) for t in l.tokens[:i]) for i in range(5)], repr(l.text_offset))
check("legacy top", all(len(t) == 2 for t in l.top_logprobs), repr(l.top_logprobs))
print("all openai feature checks passed")
