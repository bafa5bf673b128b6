"""The library's folders are layers (issue #36): a file in lib/<folder>/ includes only headers of its own folder or of
folders below it, so no include runs upward and no two folders depend on each other in a loop. The order, lowest
first, is LAYERS below; a new folder of lib/ must be placed in it. Reads the #include lines of every .cpp, .hpp and
.inc under lib/ (text only, nothing is compiled). Usage: layering_test.py SOURCE_DIR [--counts]: --counts prints the
number of upward includes and the folder loops and exits 0 (for before/after counts)."""
import os
import re
import sys

# Lowest first. io/ (HDF5 files, provenance, output paths) sits above estimators/ so that it may read and write an
# estimator's own files (io/luna_file.hpp); the option front-ends sit above everything they fill.
LAYERS = ["core", "kernels", "sampling", "data", "estimators", "io", "analysis", "tasks", "frontend"]
# Headers generated into the build tree (not in lib/).
GENERATED = {"kestrel_revision.hpp", "kestrel_paths.hpp"}  # build/generated/ (cmake/revision.cmake, cmake/paths.cmake)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def includes(lib):
    """(file relative to lib, its folder, the included path) for every quoted #include under lib/."""
    for root, _, files in os.walk(lib):
        for f in sorted(files):
            if not f.endswith((".cpp", ".hpp", ".inc")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, lib)
            folder = rel.split(os.sep)[0]
            for target in INCLUDE.findall(open(path, encoding="utf-8").read()):
                yield rel, folder, target


def target_folder(lib, rel, target):
    """The lib/ folder a quoted include resolves to: a path from lib/ ("io/hdf5.hpp") or one beside the including
    file ("fit.hpp"); None for a generated header."""
    if target in GENERATED:
        return None
    beside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if os.path.exists(os.path.join(lib, beside)):
        return beside.split(os.sep)[0]
    if os.path.exists(os.path.join(lib, target)):
        return target.split("/")[0]
    return "?" + target


def loops(edges):
    """The strongly connected components of more than one folder (Tarjan) of the folder graph."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = sorted({a for a, _ in edges} | {b for _, b in edges})
    succ = {n: sorted({b for a, b in edges if a == n}) for n in nodes}

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for n in nodes:
        if n not in index:
            visit(n)
    return out


def main(source, counts=False):
    lib = os.path.join(source, "lib")
    problems, upward, edges = [], [], set()
    for rel, folder, target in includes(lib):
        to = target_folder(lib, rel, target)
        if to is None or to == folder:
            continue
        if to.startswith("?"):
            problems.append(f"lib/{rel}: #include \"{target}\" is not a file of lib/ (include paths start at lib/)")
            continue
        edges.add((folder, to))
        for f in (folder, to):
            if f not in LAYERS:
                problems.append(f"lib/{f}/ is not placed in LAYERS of tests/layering_test.py")
        if folder in LAYERS and to in LAYERS and LAYERS.index(to) > LAYERS.index(folder):
            upward.append(f"lib/{rel}: #include \"{target}\" runs upward ({folder} is below {to})")
    cycles = loops(edges)
    if counts:
        print(f"upward includes: {len(upward)}")
        for u in upward:
            print("  " + u)
        print(f"folder loops: {len(cycles)}")
        for c in cycles:
            print("  " + " <-> ".join(c))
        return
    problems += upward + [f"folders depend on each other in a loop: {' <-> '.join(c)}" for c in cycles]
    if problems:
        sys.exit(f"{len(problems)} layering problem(s) (order, lowest first: {' < '.join(LAYERS)}):\n" +
                 "\n".join(sorted(set(problems), key=problems.index)))
    print(f"layering ok: {len(edges)} folder dependencies, all downward ({' < '.join(LAYERS)})")


if __name__ == "__main__":
    main(sys.argv[1], "--counts" in sys.argv[2:])
