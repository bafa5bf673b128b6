#!/usr/bin/python3
"""No estimator family is named in shared code (issue #21): every registry name (`kestrel estimators --json`) as a
string literal in lib/ outside lib/estimators/, in apps/, python/*.cpp and the shared experiment code (plotlib,
experiment driver, experiment registry) is a failure. Family folders, each reproduction's own text, the tests and the
Python examples (python/examples/: user scripts comparing named estimators) may name families.
usage: family_names_test.py SOURCE_DIR KESTREL_CLI"""
import json
import pathlib
import re
import subprocess
import sys

root, cli = pathlib.Path(sys.argv[1]), sys.argv[2]
names = {f["name"] for f in json.loads(subprocess.run([cli, "estimators", "--json"], check=True, capture_output=True,
                                                      text=True).stdout)}
assert len(names) >= 19, f"the registry lists only {len(names)} families"
shared = [p for p in (root / "lib").iterdir() if p.is_dir() and p.name != "estimators"]
shared += [root / "apps", root / "python", root / "experiments" / "plotlib.py", root / "experiments" / "experiment.cpp",
           root / "experiments" / "experiment.hpp", root / "experiments" / "registry.cpp"]
literal = re.compile(r'"((?:[^"\\]|\\.)*)"')
found = []
for base in shared:
    files = [base] if base.is_file() else sorted(f for f in base.rglob("*") if f.suffix in (".cpp", ".hpp", ".py")
                                                 and "tests" not in f.parts and "examples" not in f.parts)
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            found += [f"{f.relative_to(root)}:{i}: \"{s}\"" for s in literal.findall(line) if s in names]
# The check has power: the same scan finds the names in the registry itself.
registry = (root / "lib" / "estimators" / "registry.cpp").read_text()
assert names <= set(literal.findall(registry)), "the scan does not see the registry's own names"
if found:
    sys.exit("estimator names in shared code (ask the registry instead):\n" + "\n".join(found))
print(f"no family name among {len(names)} in shared code")
