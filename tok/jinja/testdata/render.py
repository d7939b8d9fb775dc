"""Oracle for the jinja engine's unit tests.

Reads a JSON list of cases {"name", "template", "vars"} on stdin and writes a
JSON list of {"out": str} or {"error": str} on stdout, rendering each with the
environment transformers builds for chat templates (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, its tojson/raise_exception/strftime_now/
namespace), so the Go engine can be compared byte for byte.
"""
import json
import sys

from transformers.utils.chat_template_utils import _cached_compile_jinja_template


def main():
    cases = json.load(sys.stdin)
    results = []
    for case in cases:
        try:
            tmpl = _cached_compile_jinja_template(case["template"])
            results.append({"out": tmpl.render(**case.get("vars", {}))})
        except Exception as e:  # every failure is data: the Go side must fail too
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
