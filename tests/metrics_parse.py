"""Parses a vramledger exposition with Python's prometheus_client (the reference parsers) and
prints every sample as JSON: the tests compare those with `vramledger report --json`.

    python3 tests/metrics_parse.py prometheus|openmetrics < exposition.txt

Exit 3 when prometheus_client is missing (the caller skips or fails on it), 1 when the text
does not parse (the message says why).
"""

import json
import sys

try:
    if sys.argv[1] == "openmetrics":
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print(f"prometheus_client is not installed: {e}", file=sys.stderr)
    sys.exit(3)

text = sys.stdin.read()
out = []
try:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append(
                {
                    "family": fam.name,
                    "type": fam.type,
                    "unit": getattr(fam, "unit", ""),
                    "name": s.name,
                    "labels": s.labels,
                    "value": s.value,
                }
            )
except Exception as e:  # the parser's own message is the point
    print(f"does not parse: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
json.dump(out, sys.stdout)
