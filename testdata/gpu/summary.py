"""One table from testdata/gpu/run.sh's bench JSON (models/testdata/oracle/bench.py
reports): medians of mlx-lm (A) and mlxgo (B), B/A, and decode against the HBM
ceiling (bandwidth / weight bytes; 4.8 TB/s is the H200's datasheet figure, the
issue's measured copy rate is 4.3 TB/s).

    python summary.py bench-*.json
"""

import json
import sys

HBM = 4.8e12


def main() -> int:
    rows = []
    for path in sys.argv[1:]:
        r = json.load(open(path))
        a, b = r["medians"].get("mlx-lm", {}), r["medians"].get("mlxgo", {})
        name = r["model"].rstrip("/").split("/")[-1]
        wb = a.get("weight_bytes") or b.get("weight_bytes") or 0

        def f(x, spec=".1f"):
            return format(x, spec) if isinstance(x, (int, float)) else "-"

        def ratio(k):
            return f(b[k] / a[k], ".2f") if a.get(k) and b.get(k) else "-"

        ceil = HBM / wb if wb else None
        rows.append([name, f(a.get("decode_tps")), f(b.get("decode_tps")), ratio("decode_tps"),
                     f(a.get("prefill_tps"), ".0f"), f(b.get("prefill_tps"), ".0f"), ratio("prefill_tps"),
                     f(ceil, ".0f"), f(b["decode_tps"] / ceil if ceil and b.get("decode_tps") else None, ".0%"),
                     f(b.get("ttft_s"), ".2f"), str(r.get("rounds"))])
    head = ["model", "mlx-lm decode", "mlxgo decode", "B/A", "mlx-lm prefill", "mlxgo prefill", "B/A",
            "ceiling tok/s", "mlxgo of ceiling", "mlxgo ttft s", "rounds"]
    w = [max(len(x) for x in col) for col in zip(head, *rows)]
    for row in [head] + rows:
        print("  ".join(x.ljust(n) for x, n in zip(row, w)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
