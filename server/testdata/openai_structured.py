"""Structured output through the official openai client (issue 15), against
mlxgo serve on real SmolLM2 (the oracle's MLX conversion, with tokenizer.json).

Usage: openai_structured.py BASE_URL. Exits non-zero on the first failed check.
"""
import json
import sys

import jsonschema
import openai
from pydantic import BaseModel

client = openai.OpenAI(base_url=sys.argv[1], api_key="none")
USER = {"role": "user", "content": "Describe a cat as JSON."}
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "indoor"],
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer", "minimum": 0, "maximum": 30},
                         "indoor": {"type": "boolean"}}}


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        sys.exit(1)


# json_schema, strict: the content validates against the schema.
r = client.chat.completions.create(model="smollm2", messages=[USER], max_tokens=64, temperature=0,
                                   response_format={"type": "json_schema",
                                                    "json_schema": {"name": "cat", "schema": SCHEMA, "strict": True}})
doc = json.loads(r.choices[0].message.content)
jsonschema.validate(doc, SCHEMA)
check("json_schema: content is valid", True)
check("json_schema: finish_reason stop", r.choices[0].finish_reason == "stop", repr(r.choices[0].finish_reason))
check("composition records the grammar", "grammar=json_schema:cat" in json.dumps(r.model_extra or {}), repr(r.model_extra))

# The same, streamed: the deltas join into valid JSON.
text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
    model="smollm2", messages=[USER], max_tokens=64, temperature=0, stream=True,
    response_format={"type": "json_schema", "json_schema": {"name": "cat", "schema": SCHEMA}}) if c.choices)
check("stream: same text as not streamed", text == r.choices[0].message.content, repr(text))

# json_object: any JSON object.
r = client.chat.completions.create(model="smollm2", messages=[USER], max_tokens=200, temperature=0,
                                   response_format={"type": "json_object"})
# (A 135M model can write an object longer than max_tokens: then it is cut,
# finish_reason "length", as OpenAI's are; a finished one must parse.)
c = r.choices[0]
if c.finish_reason == "stop":
    check("json_object: an object", isinstance(json.loads(c.message.content), dict), c.message.content)
else:
    check("json_object: cut at max_tokens, an object so far",
          c.finish_reason == "length" and c.message.content.startswith("{"), repr(c))


# The client's own structured-output helper (a pydantic model, strict schema).
class Cat(BaseModel):
    name: str
    age: int
    indoor: bool


p = client.chat.completions.parse(model="smollm2", messages=[USER], max_tokens=64, temperature=0, response_format=Cat)
check("parse(): a Cat", isinstance(p.choices[0].message.parsed, Cat), repr(p.choices[0].message))

# The Responses API's text.format, the same schema.
resp = client.responses.create(model="smollm2", input="Describe a cat as JSON.", max_output_tokens=64, temperature=0,
                               text={"format": {"type": "json_schema", "name": "cat", "schema": SCHEMA, "strict": True}})
jsonschema.validate(json.loads(resp.output_text), SCHEMA)
check("responses text.format: output_text is valid", True)

# A keyword the engine cannot enforce is a 400 naming it.
try:
    client.chat.completions.create(model="smollm2", messages=[USER], max_tokens=8, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}})
    check("uniqueItems refused", False, "no error")
except openai.BadRequestError as e:
    check("uniqueItems refused", e.body.get("param") == "response_format" and "uniqueItems" in e.body.get("message", ""),
          repr(e.body))

# SmolLM2's template has no tool calling: a forced call is a 400 naming tool_choice.
try:
    client.chat.completions.create(model="smollm2", messages=[USER], max_tokens=8, tool_choice="required",
                                   tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    check("tool_choice required refused without a tool format", False, "no error")
except openai.BadRequestError as e:
    check("tool_choice required refused without a tool format", e.body.get("param") in ("tools", "tool_choice"), repr(e.body))
print("all structured-output checks passed")
