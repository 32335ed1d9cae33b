#!/usr/bin/env python3
"""The physical limit of a run, beside its wall time (issue 72): a measure, not a test.

Reads a run's HAR (`bankconf run --report-har FILE`) and, optionally, its JSON report
(`--report-json`), and prints:

- per case, its chain of dependent exchanges: the API requests and driver calls it made one
  after another (an exchange that starts after the one before it ended depends on it; exchanges
  in flight together count once), and the longest such chain of the run;
- the round trip: the median time of an API request;
- one late-event wait: the latency of webhook deliveries the report measured (its p95; pass
  `--late SECONDS` to use a known lateness, as with `--sandbox-delivery-delay-ms`);
- the yardstick, longest chain x round trip + one late wait, beside the run's wall time, and
  their ratio (1.0: the run takes as long as its dependent work; above: waits or pauses of the
  harness's own).

Usage: scripts/critical-path.py RUN.har [RUN.json] [--late SECONDS]
"""
import json
import statistics
import sys
from datetime import datetime


def moment(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def chains(entries):
    """Per case: how many of its exchanges ran one after another (overlaps count once)."""
    by_case = {}
    for e in entries:
        if e.get("_kind") not in ("api", "driver"):
            continue
        start = moment(e["startedDateTime"])
        end = start + float(e.get("time") or 0) / 1000.0
        by_case.setdefault(e.get("_case") or "(fixtures)", []).append((start, end))
    out = {}
    for case, spans in by_case.items():
        spans.sort()
        depth, until = 0, float("-inf")
        for start, end in spans:
            if start >= until:
                depth += 1
                until = end
            else:
                until = max(until, end)
        out[case] = depth
    return out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    late = None
    if "--late" in argv:
        late = float(argv[argv.index("--late") + 1])
        args = [a for a in args if a != argv[argv.index("--late") + 1]]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    har = json.load(open(args[0]))
    entries = har["log"]["entries"]
    report = json.load(open(args[1])) if len(args) > 1 else {}
    api = [float(e.get("time") or 0) / 1000.0 for e in entries if e.get("_kind") == "api"]
    rtt = statistics.median(api) if api else 0.0
    depth = chains(entries)
    case, longest = max(depth.items(), key=lambda kv: kv[1]) if depth else ("-", 0)
    if late is None:
        late = (report.get("latency", {}).get("webhooks", {}).get("p95_ms") or 0) / 1000.0
    wall = (report.get("duration_ms") or 0) / 1000.0
    if not wall and entries:
        times = [moment(e["startedDateTime"]) for e in entries]
        wall = max(times) - min(times)
    yardstick = longest * rtt + late
    print(f"exchanges: {len(api)} API requests, {sum(1 for e in entries if e.get('_kind') == 'webhook')} deliveries")
    print(f"round trip (median API request): {rtt * 1000:.1f} ms")
    print(f"longest chain of dependent exchanges: {longest} ({case})")
    for name, d in sorted(depth.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {d:4d}  {name}")
    print(f"one late-event wait: {late:.2f} s")
    print(f"yardstick (chain x round trip + one wait): {yardstick:.2f} s; wall time: {wall:.2f} s", end="")
    print(f"; ratio {wall / yardstick:.1f}" if yardstick > 0 else "")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
