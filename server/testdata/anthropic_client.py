"""Checks mlxgo serve's /v1/messages with the official anthropic client (run by TestAnthropicClient).

Usage: anthropic_client.py AGENT_URL SMOLLM2_URL API_KEY. AGENT_URL serves a scripted Qwen3-style agent
(thinking, tool use) without MLX; SMOLLM2_URL serves the real SmolLM2. Exits non-zero on the first failed check.
"""
import sys

import anthropic

agent_url, smol_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
agent = anthropic.Anthropic(base_url=agent_url, api_key=key, max_retries=0)
smol = anthropic.Anthropic(base_url=smol_url, api_key=key, max_retries=0)


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


TOOLS = [{"name": "get_weather", "description": "Current weather",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                           "required": ["city"]}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]

# Tool use: thinking, then the call, stop_reason tool_use.
m = agent.messages.create(model="qwen3", max_tokens=64, messages=ASK, tools=TOOLS)
check("tool_use blocks", [b.type for b in m.content] == ["thinking", "tool_use"], repr(m.content))
use = m.content[1]
check("tool_use input", use.name == "get_weather" and use.input == {"city": "Paris", "unit": "celsius"}, repr(use))
check("stop_reason tool_use", m.stop_reason == "tool_use" and m.stop_sequence is None, m.stop_reason)
check("thinking text", m.content[0].thinking == "\nI need the weather tool.\n", repr(m.content[0].thinking))

# The tool's result goes back as a tool_result block; the answer is text.
turn2 = ASK + [{"role": "assistant", "content": m.content},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": '{"temp": 18}'}]}]
m2 = agent.messages.create(model="qwen3", max_tokens=64, messages=turn2, tools=TOOLS)
check("answer after tool_result", m2.stop_reason == "end_turn" and m2.content[-1].type == "text"
      and m2.content[-1].text.strip() == "It is 18°C in Paris.", repr(m2.content))

# Streaming: the SDK's accumulator rebuilds the same message from the events.
with agent.messages.stream(model="qwen3", max_tokens=64, messages=ASK, tools=TOOLS) as s:
    events = [e.type for e in s]
    final = s.get_final_message()
check("stream final message", [b.type for b in final.content] == ["thinking", "tool_use"]
      and final.content[1].input == use.input and final.stop_reason == "tool_use", repr(final))
check("stream events", events[0] == "message_start" and events[-1] == "message_stop" and "message_delta" in events,
      repr(events))

count = agent.messages.count_tokens(model="qwen3", messages=ASK, tools=TOOLS)
check("count_tokens", count.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens,
      f"{count.input_tokens} vs {m.usage}")

raises_ok = False
try:
    agent.messages.create(model="qwen3", max_tokens=64, messages=ASK, tools=TOOLS, tool_choice={"type": "any"})
except anthropic.BadRequestError as e:
    raises_ok = e.body["error"]["type"] == "invalid_request_error"
check("tool_choice any -> BadRequestError", raises_ok)

# SmolLM2: text, max_tokens, usage, the prompt cache, greedy stream = non-stream.
SAY = [{"role": "user", "content": "Name a colour."}]
r = smol.messages.create(model="smollm2", max_tokens=4, messages=SAY, system="You are brief.")
check("text", r.content[0].type == "text" and len(r.content[0].text) > 0, repr(r.content))
check("max_tokens", r.stop_reason == "max_tokens" and r.usage.output_tokens == 4, f"{r.stop_reason} {r.usage}")
with smol.messages.stream(model="smollm2", max_tokens=4, messages=SAY, system="You are brief.") as s:
    text = "".join(s.text_stream)
    fm = s.get_final_message()
check("stream text equals non-stream (greedy)", text == r.content[0].text, f"{text!r} vs {r.content[0].text!r}")
check("stream usage reads the prompt cache", fm.usage.cache_read_input_tokens > 0
      and fm.usage.input_tokens + fm.usage.cache_read_input_tokens == r.usage.input_tokens, repr(fm.usage))
full = smol.messages.create(model="smollm2", max_tokens=8, messages=[{"role": "user", "content": "Count: 1, 2, 3,"}])
cut = full.content[0].text.strip().split()[1] if len(full.content[0].text.split()) > 1 else None
if cut:
    st = smol.messages.create(model="smollm2", max_tokens=8, messages=[{"role": "user", "content": "Count: 1, 2, 3,"}],
                              stop_sequences=[cut])
    check("stop_sequence", st.stop_reason == "stop_sequence" and st.stop_sequence == cut and cut not in st.content[0].text,
          f"{st.stop_reason} {st.stop_sequence!r} {st.content!r}")

bad = anthropic.Anthropic(base_url=smol_url, api_key="wrong", max_retries=0)
auth_ok = False
try:
    bad.messages.create(model="smollm2", max_tokens=4, messages=SAY)
except anthropic.AuthenticationError as e:
    auth_ok = e.body["error"]["type"] == "authentication_error"
check("bad key -> AuthenticationError", auth_ok)
print("all anthropic client checks passed")
