"""Oracle for the chat-template parity tests: transformers' apply_chat_template.

Reads {"templates": [...], "cases": [...]} as JSON on stdin and writes
{template name: [{"out": str} | {"error": str}, ...]} on stdout, one result per
case. A template is either {"name", "tokenizer_dir"} (rendered through
AutoTokenizer.apply_chat_template(tokenize=False)) or {"name", "template",
"special_tokens"} for templates that come without a tokenizer_config (SmolLM2's
GGUF): those go through the same steps apply_chat_template takes (drop null
keys, special tokens then kwargs, render_jinja_template).
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

from transformers import AutoTokenizer  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402


def render_raw(template, special_tokens, case):
    messages = case["messages"]
    if not messages:
        raise ValueError("Cannot apply chat template to an empty conversation.")
    conversation = [{k: v for k, v in m.items() if v is not None} for m in messages]
    kwargs = {**special_tokens, **case.get("kwargs", {})}
    rendered, _ = render_jinja_template(
        conversations=[conversation],
        tools=case.get("tools"),
        chat_template=template,
        add_generation_prompt=case.get("add_generation_prompt", False),
        **kwargs,
    )
    return rendered[0]


def main():
    req = json.load(sys.stdin)
    out = {}
    for t in req["templates"]:
        tok = AutoTokenizer.from_pretrained(t["tokenizer_dir"]) if "tokenizer_dir" in t else None
        results = []
        for case in req["cases"]:
            try:
                if tok is not None:
                    text = tok.apply_chat_template(
                        case["messages"],
                        tools=case.get("tools"),
                        add_generation_prompt=case.get("add_generation_prompt", False),
                        tokenize=False,
                        **case.get("kwargs", {}),
                    )
                else:
                    text = render_raw(t["template"], t.get("special_tokens", {}), case)
                results.append({"out": text})
            except Exception as e:  # the Go side must fail on the same cases
                results.append({"error": f"{type(e).__name__}: {e}"})
        out[t["name"]] = results
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
