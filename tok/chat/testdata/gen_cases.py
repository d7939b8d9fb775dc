"""Writes cases.json, the conversations of the chat-template parity tests.

Run once by hand when adding cases (python gen_cases.py > cases.json); the
file is committed and the expected renders come from oracle.py at test time.
"""
import json

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city — ☀️ or 🌧",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "threshold": {"type": "number", "default": 0.5}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"},
                       "filters": {"type": "array", "items": {"type": "string"}}}, "required": ["q"]}}},
]

SYS = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "Paris."}
U2 = {"role": "user", "content": "And of Germany?"}

CALL_OBJ = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius", "days": 3}}}]}
CALL_STR = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
CALL_TWO = {"role": "assistant", "content": "Let me check both.", "tool_calls": [
    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "threshold": 0.25}}},
    {"id": "b", "type": "function", "function": {"name": "search", "arguments": {"q": "Oslo events", "filters": ["today", "free"]}}}]}
TOOL_RES = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"}

cases = [
    {"name": "single_user", "messages": [U1], "add_generation_prompt": True},
    {"name": "system_user", "messages": [SYS, U1], "add_generation_prompt": True},
    {"name": "multi_turn", "messages": [SYS, U1, A1, U2], "add_generation_prompt": True},
    {"name": "multi_turn_no_system", "messages": [U1, A1, U2], "add_generation_prompt": True},
    {"name": "no_generation_prompt", "messages": [SYS, U1, A1], "add_generation_prompt": False},
    {"name": "tools_defined", "messages": [SYS, {"role": "user", "content": "Weather in Zürich?"}], "tools": TOOLS, "add_generation_prompt": True},
    {"name": "tools_no_system", "messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS, "add_generation_prompt": True},
    {"name": "tool_call_object_args", "messages": [{"role": "user", "content": "Weather in Zürich?"}, CALL_OBJ, TOOL_RES], "tools": TOOLS, "add_generation_prompt": True},
    {"name": "tool_call_string_args", "messages": [{"role": "user", "content": "Weather in Paris?"}, CALL_STR, TOOL_RES, {"role": "assistant", "content": "It is 21 °C and clear."}], "tools": TOOLS},
    {"name": "two_tool_calls_two_results", "messages": [U1, CALL_TWO, {"role": "tool", "tool_call_id": "a", "content": "5 °C"}, {"role": "tool", "tool_call_id": "b", "content": "Concert at 8pm"}], "tools": TOOLS, "add_generation_prompt": True},
    {"name": "thinking_off", "messages": [U1], "add_generation_prompt": True, "kwargs": {"enable_thinking": False}},
    {"name": "thinking_on", "messages": [SYS, U1], "add_generation_prompt": True, "kwargs": {"enable_thinking": True}},
    {"name": "reasoning_content_history", "messages": [U1, {"role": "assistant", "content": "Paris.", "reasoning_content": "The user asks about France.\n"}, U2], "add_generation_prompt": True},
    {"name": "reasoning_last_assistant", "messages": [U1, {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy."}]},
    {"name": "think_tags_in_content", "messages": [U1, {"role": "assistant", "content": "<think>\nRecall geography.\n</think>\n\nParis."}, U2], "add_generation_prompt": True, "kwargs": {"enable_thinking": False}},
    {"name": "thinking_field_alias", "messages": [U1, {"role": "assistant", "content": "Paris.", "thinking": "alias test"}]},
    {"name": "reasoning_field_alias", "messages": [U1, {"role": "assistant", "content": "Paris.", "reasoning": "other alias"}, U2], "add_generation_prompt": True},
    {"name": "content_parts", "messages": [{"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]}], "add_generation_prompt": True},
    {"name": "system_parts", "messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "user", "content": "Hi"}], "add_generation_prompt": True},
    {"name": "unicode", "messages": [{"role": "user", "content": "Grüße aus Köln! 你好，世界 🌍 — «ça va?» naïve café"}, {"role": "assistant", "content": "Здравствуйте! こんにちは 👋"}], "add_generation_prompt": True},
    {"name": "whitespace_content", "messages": [{"role": "user", "content": "  \n\tpadded question\n\n  "}, {"role": "assistant", "content": "\n answer with spaces \n"}, {"role": "user", "content": "line1\r\nline2"}], "add_generation_prompt": True},
    {"name": "template_like_text", "messages": [{"role": "user", "content": "Explain {{ messages }} and {% if %} and <|im_end|>"}], "add_generation_prompt": True},
    {"name": "empty_content", "messages": [{"role": "user", "content": ""}], "add_generation_prompt": True},
    {"name": "system_only", "messages": [SYS], "add_generation_prompt": True},
    {"name": "assistant_last_continue", "messages": [SYS, U1, A1]},
    {"name": "roles_not_alternating", "messages": [U1, U2], "add_generation_prompt": True},
    {"name": "name_field", "messages": [{"role": "user", "content": "Hi, I'm Ann", "name": "ann"}], "add_generation_prompt": True},
    {"name": "long_conversation", "messages": [SYS] + [m for i in range(6) for m in (
        {"role": "user", "content": f"Question {i}: what is {i} squared?"},
        {"role": "assistant", "content": f"{i * i}"})] + [U2], "add_generation_prompt": True},
    {"name": "extra_kwargs", "messages": [U1], "add_generation_prompt": True, "kwargs": {"custom_flag": "x", "enable_thinking": True}},
    {"name": "tool_result_after_user", "messages": [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}, CALL_STR, TOOL_RES], "tools": TOOLS, "add_generation_prompt": True},
    {"name": "empty_tools_list", "messages": [U1], "tools": [], "add_generation_prompt": True},
]

if __name__ == "__main__":
    print(json.dumps(cases, ensure_ascii=False, indent=1))
