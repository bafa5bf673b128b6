"""Every test is in a tier that scripts/test.sh runs (issue 64): each ctest test carries labels, every label is one of
docs/testing.md's table, and the runs of scripts/test.sh (the Release build but the `python` label, the Python tests
against the installed package, the `sanitize` label) together select every test. Lists the tests per tier.
Usage: tiers_test.py SOURCE_DIR BUILD_DIR"""
import json
import re
import subprocess
import sys
from pathlib import Path


def tests_and_labels(build):
    out = subprocess.run(["ctest", "--test-dir", str(build), "-N", "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for t in json.loads(out)["tests"]:
        labels = [p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"]
        found[t["name"]] = set(labels[0]) if labels else set()
    return found


def tier_rows(source):
    """The rows of tests/tiers.cmake's table: (regular expression, labels), in order."""
    text = (Path(source) / "tests" / "tiers.cmake").read_text()
    table = text[text.index("set(kestrel_tiers"):text.index("\n)\n")]
    rows = re.findall(r'^\s*"([^"]+)"\s+"([^"]+)"\s+\d+\s*$', table, flags=re.M)
    return [(pattern.replace("\\\\", "\\"), labels.split(",")) for pattern, labels in rows]


def shadowed_rows(source, names):
    """Rows of the table that take no test (every test they match, an earlier row takes): a row placed too late."""
    rows = tier_rows(source)
    taken = [0] * len(rows)
    for name in names:
        first = next((i for i, (pattern, _) in enumerate(rows) if re.search(pattern, name)), None)
        if first is not None:
            taken[first] += 1
    return [f"tests/tiers.cmake: the row {rows[i][0]!r} takes no test (an earlier row takes them, or none matches)"
            for i in range(len(rows)) if not taken[i]]


def documented_labels(source):
    """The labels in docs/testing.md's table: rows that start with | `label` |."""
    text = (Path(source) / "docs" / "testing.md").read_text()
    return set(re.findall(r"^\| `([a-z]+)` \|", text, flags=re.M))


def main(source, build):
    found = tests_and_labels(build)
    documented = documented_labels(source)
    errors = [f"{name}: no labels" for name, labels in found.items() if not labels]
    errors += [f"{name}: label '{lab}' is not in docs/testing.md's table ({sorted(documented)})"
               for name, labels in found.items() for lab in sorted(labels - documented)]
    errors += shadowed_rows(source, found)
    # scripts/test.sh: Release runs every test but `python`; the `python` tests run against the installed package.
    python_tests = [n for n, labels in found.items() if "python" in labels]
    if any(not n.startswith("python") for n in python_tests):
        errors.append(f"only the pytest runs may carry the python label, not {python_tests}")
    tiers = {lab: sorted(n for n, labels in found.items() if lab in labels) for lab in sorted(documented)}
    for lab, names in tiers.items():
        print(f"{lab}: {len(names)} tests")
    if not tiers.get("sanitize") or not tiers.get("unit") or not tiers.get("cli"):
        errors.append("the sanitize, unit and cli tiers must each hold tests")
    quick = [n for n, labels in found.items() if labels & {"unit", "cli"} and "slow" not in labels]
    print(f"--quick (unit or cli, not slow): {len(quick)} tests; all: {len(found)}")
    for e in errors:
        print("FAIL", e)
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
