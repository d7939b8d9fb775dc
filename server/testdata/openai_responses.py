"""Checks mlxgo serve's /v1/responses with the official openai client (run by TestOpenAIClientResponses).

Usage: openai_responses.py AGENT_URL SMOLLM2_URL API_KEY (base URLs ending in /v1). AGENT_URL serves a scripted
Qwen3-style agent (reasoning, tool calls) without MLX; SMOLLM2_URL serves the real SmolLM2. Exits non-zero on the
first failed check.
"""
import json
import sys

import openai

agent_url, smol_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
agent = openai.OpenAI(base_url=agent_url, api_key=key, max_retries=0)
smol = openai.OpenAI(base_url=smol_url, api_key=key, max_retries=0)


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)
    if not cond:
        sys.exit(1)


TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather", "strict": False,
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                         "required": ["city"]}}]

# A tool call: a reasoning item, then a function_call item.
r = agent.responses.create(model="agent", instructions="Be terse.", input="Weather in Paris?", tools=TOOLS)
check("output items", [o.type for o in r.output] == ["reasoning", "function_call"], repr(r.output))
call = r.output[1]
check("function_call", call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris", "unit": "celsius"}
      and call.call_id.startswith("call_"), repr(call))
check("reasoning text", r.output[0].content[0].text == "\nI need the weather tool.\n", repr(r.output[0]))
check("status and usage", r.status == "completed" and r.usage.input_tokens > 0 and r.usage.output_tokens > 0
      and r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
      and r.usage.input_tokens_details.cached_tokens == 0, repr(r.usage))

# The tool's output goes back as input items: the answer is a message.
items = [{"role": "user", "content": "Weather in Paris?"},
         {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
         {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 18}'}]
r2 = agent.responses.create(model="agent", input=items, tools=TOOLS)
check("answer after function_call_output", r2.output_text.strip() == "It is 18°C in Paris.", repr(r2.output))

# previous_response_id continues the stored conversation.
r3 = agent.responses.create(model="agent", previous_response_id=r.id, tools=TOOLS,
                            input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 18}'}])
check("previous_response_id", r3.output_text.strip() == "It is 18°C in Paris." and r3.previous_response_id == r.id,
      repr(r3.output))
got = agent.responses.retrieve(r3.id)
check("retrieve", got.id == r3.id and got.output_text == r3.output_text)

# store=False: nothing to continue from.
r4 = agent.responses.create(model="agent", input="hi", store=False)
err = None
try:
    agent.responses.create(model="agent", input="again", previous_response_id=r4.id)
except openai.BadRequestError as e:
    err = e
check("store=False is not kept", err is not None and err.code == "previous_response_not_found"
      and err.param == "previous_response_id", repr(err))

# Streaming: the SDK's accumulator rebuilds the same response from the events.
with agent.responses.stream(model="agent", input="Weather in Paris?", tools=TOOLS) as s:
    events = [e.type for e in s]
    final = s.get_final_response()
check("stream final response", [o.type for o in final.output] == ["reasoning", "function_call"]
      and final.output[1].arguments == call.arguments, repr(final.output))
check("stream events", events[:2] == ["response.created", "response.in_progress"]
      and events[-1] == "response.completed" and "response.function_call_arguments.delta" in events, repr(events))
stream = agent.responses.create(model="agent", input="Colour?", stream=True)
deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
check("stream=True text deltas", deltas.strip() == "Blue.", repr(deltas))

err = None
try:
    agent.responses.create(model="agent", input="hi", tools=TOOLS, tool_choice="required")
except openai.BadRequestError as e:
    err = e
check("tool_choice required -> BadRequestError", err is not None and err.param == "tool_choice", repr(err))

# SmolLM2: text, max_output_tokens, the prompt cache, greedy stream = non-stream.
t = smol.responses.create(model="smollm2", instructions="You are brief.", input="Name a colour.", max_output_tokens=4,
                          temperature=0)
check("text", len(t.output_text) > 0 and t.output[0].type == "message", repr(t.output))
check("max_output_tokens", t.status == "incomplete" and t.incomplete_details.reason == "max_output_tokens"
      and t.usage.output_tokens == 4, f"{t.status} {t.usage}")
with smol.responses.stream(model="smollm2", instructions="You are brief.", input="Name a colour.",
                           max_output_tokens=6, temperature=0) as s:
    text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
t6 = smol.responses.create(model="smollm2", instructions="You are brief.", input="Name a colour.", max_output_tokens=6,
                           temperature=0)
check("stream text equals non-stream (greedy)", text == t6.output_text, f"{text!r} vs {t6.output_text!r}")
check("usage reads the prompt cache", t6.usage.input_tokens_details.cached_tokens > 0
      and t6.usage.input_tokens == t.usage.input_tokens, repr(t6.usage))
t2 = smol.responses.create(model="smollm2", previous_response_id=t6.id, input="Another one.", max_output_tokens=4)
check("previous_response_id on SmolLM2", t2.usage.input_tokens > t6.usage.input_tokens + t6.usage.output_tokens
      and t2.usage.input_tokens_details.cached_tokens > 0, repr(t2.usage))

bad = openai.OpenAI(base_url=smol_url, api_key="wrong", max_retries=0)
auth = None
try:
    bad.responses.create(model="smollm2", input="hi")
except openai.AuthenticationError as e:
    auth = e
check("bad key -> AuthenticationError", auth is not None)
print("all openai responses checks passed")
