#!/usr/bin/python3
"""The committed type stubs (python/kestrel/__init__.pyi) are what scripts/python_stubs.py generates from the declared
entry points now, and they parse; every entry point with a Python name is a function of the package with the
signature the stubs give it. usage: stubs_test.py SOURCE_DIR BUILD_PYTHON_DIR"""
import ast
import inspect
import os
import subprocess
import sys
import tempfile


def main(source, build_python):
    committed = os.path.join(source, "python", "kestrel", "__init__.pyi")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "__init__.pyi")
        env = dict(os.environ, PYTHONPATH=build_python)
        subprocess.run(["/usr/bin/python3", os.path.join(source, "scripts", "python_stubs.py"), fresh], env=env,
                       check=True)
        want = open(fresh).read()
    have = open(committed).read() if os.path.exists(committed) else ""
    if have != want:
        sys.exit(f"{committed} is stale: run PYTHONPATH={build_python} /usr/bin/python3 scripts/python_stubs.py "
                 f"{committed}")
    tree = ast.parse(have)
    stubbed = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    sys.path.insert(0, build_python)
    import kestrel
    for e in kestrel._kestrel._entry_points():
        if not e["python"]:
            continue
        f = stubbed[e["python"]]
        params = [a.arg for a in f.args.args + f.args.kwonlyargs]
        actual = list(inspect.signature(getattr(kestrel, e["python"])).parameters)
        if params != actual:
            sys.exit(f"kestrel.{e['python']}: the stub's parameters {params} differ from the function's {actual}")
    print(f"stubs ok: {len(stubbed) - 2} entry points")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
