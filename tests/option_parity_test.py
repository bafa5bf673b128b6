"""The command line, the TOML sections and the Python functions offer the same options with the same defaults for each
command (issue #36 item 2). The command line is read back from the registered options (`kestrel options --json`, a
hidden subcommand that walks CLI11's own option objects), Python from inspect.signature of the kestrel functions, TOML
by running each command once with a config that sets every option with a default to that default (the result must
equal the run without the config). The Python-only functions (draw_regime, classify, attention_error) must return the
same with every default given explicitly as with none. Options that only other regimes read are left out of the
runs at every default: given where nothing reads them they are refused (issue #37 item 9). Usage: option_parity_test.py KESTREL_BINARY PYTHON_MODULE_DIR"""
import inspect
import json
import os
import subprocess
import sys
import tempfile

kestrel_bin, pydir = sys.argv[1:3]
sys.path.insert(0, pydir)
# kestrel first: it sets OPENBLAS_CORETYPE before NumPy loads OpenBLAS, so that Python and the command line use the same
# BLAS kernels (with NumPy first, a CPU that OpenBLAS cannot identify gets other kernels, and results differ in the last
# digits from the command line's).
import kestrel  # noqa: E402
import numpy as np  # noqa: E402, I001

# Offered on one side only, on purpose.
CLI_ONLY = {"config": "the TOML file itself", "json": "Python returns the dict", "queries": "Python takes arrays Q",
            "name": "positional"}
# out: a positional argument in Python (sweep, reproduce) or returned (variance); advise takes out= and force= as
# keywords. Files Python does not write (variance's force), and advise's input files (Python takes the arrays Q, K, V).
# advise's shard: a model's layers split over job-array tasks run the command line on saved inputs, and `kestrel advise
# merge` writes the report (kestrel.advise in Python advises the whole stack in one call).
CLI_ONLY_BY_COMMAND = {"variance": {"force", "out"}, "sweep": {"out"}, "reproduce": {"out"},
                       "advise": {"queries", "keys", "values", "shard"}}
PYTHON_ONLY = {"progress": "sweep, advise, reproduce: stderr lines in Python; the command line prints them unless "
               "--quiet"}
# Read only by other regimes than the runs' normal one: refused where nothing reads them (issue #37 item 9).
OTHER_REGIMES = {"data-dir", "preprocess", "resize", "pixel-scale", "spectrum", "clusters", "cluster-radius", "x-file",
                 "y-file"}
# The commands that are also Python functions, as the entry points are declared (experiments/entry_points.hpp).
FUNCTIONS = {e["cli"]: e["python"] for e in kestrel._kestrel._entry_points() if e["cli"] and e["python"]}
assert set(FUNCTIONS) == {"variance", "sweep", "advise", "reproduce"}, FUNCTIONS
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def cli_text(value):
    """A Python default as the command line shows it."""
    if value is None or value is False:
        return ""
    if isinstance(value, list):
        return ",".join(cli_text(v) for v in value)
    if isinstance(value, float) and value == int(value):
        return str(int(value))
    return str(value)


cli = json.loads(subprocess.run([kestrel_bin, "options", "--json"], check=True, capture_output=True,
                                text=True).stdout)
for command, function in FUNCTIONS.items():
    offered = {o["name"]: o for o in cli[command]
               if not o["hidden"] and o["name"] not in CLI_ONLY and o["name"] not in CLI_ONLY_BY_COMMAND.get(command, ())}
    params = {p.name.replace("_", "-"): p for p in inspect.signature(getattr(kestrel, function)).parameters.values()
              if p.kind == p.KEYWORD_ONLY and p.name not in PYTHON_ONLY}
    for name in sorted(set(offered) ^ set(params)):
        fail(f"{command}: '{name}' is offered by {'the command line' if name in offered else 'Python'} only")
    for name in sorted(set(offered) & set(params)):
        cli_default = "" if offered[name]["flag"] else offered[name]["default"]
        if cli_default != cli_text(params[name].default):
            fail(f"{command}: '{name}' defaults to '{cli_default}' on the command line, {params[name].default!r} in "
                 "Python")
    print(f"{command}: {len(set(offered) & set(params))} options on the command line and in Python")


def toml_value(text, example):
    """The CLI default text as a TOML value of the Python default's type."""
    def one(t, v):
        return "true" if v is True else "false" if v is False else json.dumps(t) if isinstance(v, str) else t
    if isinstance(example, list):
        return "[" + ", ".join(one(t, example[0]) for t in text.split(",")) + "]"
    return one(text, example)


def run_json(args):
    p = subprocess.run([kestrel_bin, "--quiet"] + args + ["--json"], capture_output=True, text=True)
    if p.returncode:
        fail(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
        return None
    j = json.loads(p.stdout)
    j["provenance"]["options"].pop("out", None)
    return {"options": j["provenance"]["options"], "results": j["results"]}


with tempfile.TemporaryDirectory() as tmp:
    # --mc 4: the Monte Carlo options (sampler, mc-points) are read only when something is simulated.
    small = ["--points", "12", "--dim", "4", "--pairs", "1", "--estimators", "pos,oprf", "--quantity", "kc", "--mc",
             "4"]
    for command in ("variance", "sweep"):
        params = inspect.signature(getattr(kestrel, FUNCTIONS[command])).parameters
        lines = [f"[{command}]"]
        for o in cli[command]:
            if (o["hidden"] or o["name"] in CLI_ONLY or o["name"] in CLI_ONLY_BY_COMMAND.get(command, ())
                    or o["name"] in OTHER_REGIMES or o["name"] == "force"):  # force: the command line's, not TOML's
                continue
            if o["flag"]:
                lines.append(f"{o['name']} = false")
            elif o["default"]:
                lines.append(f"{o['name']} = {toml_value(o['default'], params[o['name'].replace('-', '_')].default)}")
        config = os.path.join(tmp, f"{command}.toml")
        open(config, "w").write("\n".join(lines) + "\n")
        out = ["--out", os.path.join(tmp, f"{command}-%s.h5")] if command == "sweep" else []
        with_config = run_json([command, "--config", config] + small + [x.replace("%s", "a") for x in out])
        without = run_json([command] + small + [x.replace("%s", "b") for x in out])
        if with_config != without:
            fail(f"{command}: a config setting every option to its default changes the run")
        print(f"{command}: TOML section with {len(lines) - 1} keys at their defaults: same options and results")

    # variance_study with every default given explicitly equals `kestrel variance` at its defaults.
    defaults = {n: p.default for n, p in inspect.signature(kestrel.variance_study).parameters.items()
                if p.default is not None and n.replace("_", "-") not in OTHER_REGIMES}
    defaults.update(points=12, dim=4, pairs=1, estimators=["pos", "oprf"], quantity="kc", mc=4)
    py = kestrel.variance_study(**defaults)
    cli_rows = run_json(["variance"] + small)["results"]
    if json.dumps(py, sort_keys=True) != json.dumps(cli_rows, sort_keys=True):
        fail("variance_study with every default given differs from `kestrel variance` at its defaults")


def explicit_defaults(function):
    return {n: p.default for n, p in inspect.signature(function).parameters.items()
            if p.kind == p.KEYWORD_ONLY and p.default is not None}


a = kestrel.draw_regime("clustered", 4, 8, 0.5)
b = kestrel.draw_regime("clustered", 4, 8, 0.5, **explicit_defaults(kestrel.draw_regime))
if not all(np.array_equal(x, y) for x, y in zip(a, b)):
    fail("draw_regime: the defaults given explicitly change the draw")
Q, K = kestrel.draw_regime("normal", 4, 16, 0.5)
V = np.ones((16, 2))
a = kestrel.attention_error(Q, K, V, "pos", reps=3)
b = kestrel.attention_error(Q, K, V, "pos", **dict(explicit_defaults(kestrel.attention_error), reps=3))
if not np.array_equal(a["relative_error"], b["relative_error"]):
    fail("attention_error: the defaults given explicitly change the result")
a = kestrel.classify("wine", "pos", seeds=2, features=8)
b = kestrel.classify("wine", "pos", **dict(explicit_defaults(kestrel.classify), seeds=2, features=8))
if not np.array_equal(a["test_accuracy"], b["test_accuracy"]) or not np.array_equal(a["sigmas"], b["sigmas"]):
    fail("classify: the defaults given explicitly change the result")

if failures:
    sys.exit(f"{len(failures)} option parity failures")
print("option parity: command line, TOML and Python agree")
