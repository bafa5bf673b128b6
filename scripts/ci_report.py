#!/usr/bin/env python3
"""Prints where the test suite's time goes: each stage of scripts/test.sh and the slowest tests of each run.

Reads what scripts/test.sh leaves in build/ci/: stages.tsv (stage, wall seconds, exit code, CPU seconds, start in seconds
after the run began) and one JUnit XML per test run
(ctest --output-junit, pytest --junitxml). Writes a Markdown report to stdout (the table committed in
bench/results/ci.md comes from here). Usage: scripts/ci_report.py [build/ci] [--slowest 25]
"""
import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def stages(folder):
    rows = []
    path = folder / "stages.tsv"
    for line in path.read_text().splitlines() if path.exists() else []:
        name, seconds, status, *more = line.split("\t")
        cpu, start = (int(more[0]) if more else None), (int(more[1]) if len(more) > 1 else None)
        rows.append((name, int(seconds), int(status), cpu, start))
    return rows


def cases(xml_path):
    """(name, seconds, outcome) of every test case in one JUnit file."""
    out = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name", "?")
        if case.get("classname") and not xml_path.stem.startswith("ctest"):
            name = f"{case.get('classname')}::{name}"
        outcome = "passed"
        for tag, meaning in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
            if case.find(tag) is not None:
                outcome = meaning
        status = case.get("status")  # ctest's: run, fail, notrun, disabled
        if status in ("fail", "failed"):
            outcome = "failed"
        elif status in ("notrun", "disabled"):
            outcome = "skipped"
        out.append((name, float(case.get("time", 0)), outcome))
    return out


def closing_line(folder):
    """Every run's tests counted as one plain 'N passed, N failed, N skipped' line."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for xml_path in folder.glob("*.xml"):
        for _, _, outcome in cases(xml_path):
            counts[outcome] += 1
    return f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"


def report(folder, slowest):
    lines = ["| stage | starts at (s) | seconds | minutes | CPU seconds (cores busy) | exit |",
             "|---|---:|---:|---:|---:|---:|"]
    summed = total_cpu = end = 0
    for name, seconds, status, cpu, start in stages(folder):
        summed += seconds
        total_cpu += cpu or 0
        end = max(end, (start if start is not None else summed - seconds) + seconds)
        busy = f"{cpu} ({cpu / seconds:.2f})" if cpu is not None and seconds else "" if cpu is None else str(cpu)
        at = "" if start is None else str(start)
        lines.append(f"| {name} | {at} | {seconds} | {seconds / 60:.1f} | {busy} | {status} |")
    # Stages that overlap (the background sanitize build) count once: the total is from the first start to the last end.
    lines.append(f"| **total** (first start to last end) | | **{end}** | **{end / 60:.1f}** | {total_cpu} | |")
    for xml_path in sorted(folder.glob("*.xml")):
        found = cases(xml_path)
        counts = {}
        for _, _, outcome in found:
            counts[outcome] = counts.get(outcome, 0) + 1
        summed = sum(t for _, t, _ in found)
        lines += ["", f"### {xml_path.stem}: {len(found)} tests, "
                  + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                  + f", {summed:.0f} s summed over tests", "",
                  f"| {slowest} slowest | seconds |", "|---|---:|"]
        for name, seconds, _ in sorted(found, key=lambda c: -c[1])[:slowest]:
            lines.append(f"| {name} | {seconds:.1f} |")
    return "\n".join(lines + ["", closing_line(folder)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="build/ci", type=Path)
    parser.add_argument("--slowest", type=int, default=25)
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"ci_report: {args.folder} is not a folder; run scripts/test.sh first (it writes build/ci/)",
              file=sys.stderr)
        sys.exit(2)
    print(report(args.folder, args.slowest))


if __name__ == "__main__":
    main()
