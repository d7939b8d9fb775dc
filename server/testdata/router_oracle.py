"""mlx-lm 0.32.2's reasoning/tool split and tool parsers, as the oracle for
server.router (run by TestRouterOracle).

Reads {"cases": [{"chunks": [...], "initial": "normal"|"reasoning",
"think": bool, "tools": "json_tools"|"qwen3_coder"|"", "defs": [...]}]} on stdin
and writes one result per case on stdout: the text by state as mlx_lm.server's
response loop collects it (consecutive pieces of one state merged; the
buffer flushed at the end, as on finish_reason "length"), and each tool
text parsed by mlx-lm's parser (null where it raises).
"""
import importlib
import json
import sys

from mlx_lm.generate import TextStateMachine


def machine(think, tools):
    # make_text_state_machine's transitions for a tokenizer with <think>
    # tokens and the given tool parser.
    transitions = {}
    if think:
        transitions.setdefault("normal", []).append(("<think>", "reasoning"))
        transitions["reasoning"] = [("</think>", "normal")]
    if tools:
        mod = importlib.import_module(f"mlx_lm.tool_parsers.{tools}")
        transitions.setdefault("normal", []).append((mod.tool_call_start, "tool"))
        if think:
            transitions["reasoning"].append((mod.tool_call_start, "tool"))
        transitions["tool"] = [(mod.tool_call_end, "normal")] if mod.tool_call_end else []
    return TextStateMachine(transitions or None)


def run(case):
    sm = machine(case["think"], case["tools"])
    state = sm.make_state(case["initial"])
    segments = []
    for chunk in case["chunks"]:
        state, segs = TextStateMachine.split(state, chunk)
        segments.extend(segs)
    state, flushed, current = TextStateMachine.flush(state)
    segments.append((current, flushed))

    # mlx_lm.server's loop: tool text runs from a tool segment to the next
    # state change; consecutive text of one state is merged here.
    merged, tool_texts, prev, tool_text = [], [], case["initial"], ""
    for s, text in segments:
        if s == "tool":
            tool_text += text
        elif prev == "tool":
            tool_texts.append(tool_text)
            tool_text = ""
        if s != "tool" and text:
            if merged and merged[-1][0] == s:
                merged[-1][1] += text
            else:
                merged.append([s, text])
        prev = s
    if prev == "tool" and tool_text:
        tool_texts.append(tool_text)

    calls = []
    if case["tools"]:
        parse = importlib.import_module(f"mlx_lm.tool_parsers.{case['tools']}").parse_tool_call
        for t in tool_texts:
            try:
                c = parse(t, case.get("defs"))
                c = c if isinstance(c, list) else [c]
                calls.append([{"name": x["name"], "arguments": x["arguments"]} for x in c])
            except Exception:  # noqa: BLE001 - any failure is "not a call"
                calls.append(None)
    return {"segments": merged, "tool_texts": tool_texts, "calls": calls}


print(json.dumps([run(c) for c in json.load(sys.stdin)["cases"]]))
