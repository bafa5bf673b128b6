"""The docs' estimator table (docs/methods.md, section "## Estimators") names exactly the registered families (issue
#36): every name of `kestrel estimators --json` is in the table's first column, and every name there is registered.
Usage: estimator_table_test.py SOURCE_DIR KESTREL_BINARY"""
import json
import re
import subprocess
import sys


PAGE = "docs/methods.md"


def table_names(page):
    text = open(page, encoding="utf-8").read()
    section = text.split("## Estimators", 1)[1].split("\n#", 1)[0]
    names = []
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 2 and not set(cells[1].strip()) <= set("-"):
            names += re.findall(r"`([^`]+)`", cells[1])
    return names


def main(source, kestrel):
    registered = [f["name"] for f in json.loads(subprocess.check_output([kestrel, "estimators", "--json"], text=True))]
    listed = table_names(f"{source}/{PAGE}")
    problems = [f"registered but not in {PAGE}'s estimator table: {n}" for n in registered if n not in listed]
    problems += [f"in {PAGE}'s estimator table but not registered: {n}" for n in listed if n not in registered]
    problems += [f"listed twice in {PAGE}'s estimator table: {n}" for n in set(listed) if listed.count(n) > 1]
    if problems:
        sys.exit("\n".join(problems))
    print(f"{PAGE}'s estimator table lists the {len(registered)} registered families")


if __name__ == "__main__":
    main(*sys.argv[1:3])
