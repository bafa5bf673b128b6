"""No function longer than a screen (issue 69 item 4): measures every C++ function defined in lib/, apps/,
experiments/ and python/ (from its opening to its closing brace, blank and comment lines included) and every Python
function of the package python/kestrel/, leaving out declared tables (a function that only builds and returns a static
table). A function over LIMIT lines fails the test unless tests/long_functions.txt lists it with a length it has not
outgrown: that list only shrinks (remove a line when its function is split). Reads text only; nothing is compiled.
Usage: function_length_test.py SOURCE_DIR [--counts]: --counts prints how many functions are over 80 and over 50 lines
and the longest, and exits 0 (for before/after counts)."""
import ast
import os
import re
import sys

LIMIT = 80
CPP_DIRS = ("lib", "apps", "experiments", "python")
NOT_FUNCTIONS = re.compile(r"\b(namespace|class|struct|union|enum)\b[^(]*$|=\s*$|\b(if|for|while|switch|catch|do|else|"
                           r"try)\b\s*(\(.*\))?\s*$")
TABLE = re.compile(r"\bstatic const [^;(=]*=\s*\{")


def strip(text):
    """C++ text with comments, strings and character literals blanked (newlines kept, so line numbers hold)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def brace_kind(head, stack):
    """What the brace after `head` opens: "scope" (namespace, class), "function" (a function's body at namespace or
    class scope) or "block" (anything else, also everything inside a function)."""
    if not all(kind == "scope" for kind, _, _ in stack):
        return "block"
    if re.search(r"\b(namespace|class|struct|union)\b", head) or re.search(r"\bextern\s*$", head):
        return "scope"
    if NOT_FUNCTIONS.search(head):
        return "block"
    if re.search(r"\)\s*((const|noexcept|override|final)\s*)*(->\s*[^{}]+)?$", head) or re.search(r"\)\s*:\s*\w", head):
        return "function"
    return "block"


def cpp_functions(path):
    """(name, first line, lines) of each function whose body opens at namespace or class scope."""
    text = strip(open(path, encoding="utf-8").read())
    out, stack, head_start = [], [], 0  # stack: (kind, name, first line) per open brace
    for i, ch in enumerate(text):
        if ch == "{":
            head = " ".join(text[head_start:i].split())
            kind = brace_kind(head, stack)
            name = re.findall(r"(operator\S+|[\w:~]+)\s*\(", head)
            stack.append((kind, name[0] if name else "?", text.count("\n", 0, i) + 1))
            head_start = i + 1
        elif ch == "}" and stack:
            kind, name, first = stack.pop()
            if kind == "function":
                out.append((name, first, text.count("\n", 0, i) + 2 - first))
            head_start = i + 1
        elif ch == ";":
            head_start = i + 1
    return out


def is_table(path, first, lines):
    """A declared table: the body is one static const table (after any using-declarations) and returns it."""
    with open(path, encoding="utf-8") as f:
        body = strip("".join(f.readlines()[first - 1:first - 1 + lines]))
    body = body[body.find("{") + 1:]
    m = TABLE.search(body)
    if not m or re.sub(r"\busing\b[^;]*;", "", body[:m.start()]).strip():
        return False
    depth, i = 0, body.find("{", m.start())
    for j in range(i, len(body)):
        depth += {"{": 1, "}": -1}.get(body[j], 0)
        if depth == 0:
            return re.fullmatch(r"\s*;\s*return\s+\w+\s*;\s*}\s*", body[j + 1:]) is not None
    return False


def python_functions(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def measure(source):
    """{"path:name": lines} of every function measured."""
    found = {}
    for d in CPP_DIRS:
        for root, _, files in os.walk(os.path.join(source, d)):
            if "/tests" in root.replace(source, "") or "/examples" in root.replace(source, ""):
                continue
            for f in sorted(files):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, source)
                if f.endswith((".cpp", ".hpp")):
                    for name, first, lines in cpp_functions(path):
                        if not is_table(path, first, lines):
                            found[f"{rel}:{name}"] = max(lines, found.get(f"{rel}:{name}", 0))
                elif f.endswith(".py") and rel.startswith("python/kestrel/"):
                    for name, first, lines in python_functions(path):
                        found[f"{rel}:{name}"] = max(lines, found.get(f"{rel}:{name}", 0))
    return found


def main(source):
    found = measure(source)
    if "--counts" in sys.argv:
        longest = sorted(found.items(), key=lambda kv: -kv[1])[:10]
        print(f"{len(found)} functions; over 80 lines: {sum(v > 80 for v in found.values())}; over 50 lines: "
              f"{sum(v > 50 for v in found.values())}")
        for k, v in longest:
            print(f"  {v:4d} {k}")
        return
    allowed = {}
    with open(os.path.join(source, "tests", "long_functions.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                lines, where = line.split(maxsplit=1)
                allowed[where.strip()] = int(lines)
    problems = [f"{k}: {v} lines (over {LIMIT}; split it)" for k, v in sorted(found.items())
                if v > LIMIT and k not in allowed]
    problems += [f"{k}: {found[k]} lines, listed at {v} in tests/long_functions.txt (it may only shrink)"
                 for k, v in sorted(allowed.items()) if k in found and found[k] > v]
    problems += [f"tests/long_functions.txt lists {k}, which is no longer over {LIMIT} lines: remove the line"
                 for k in sorted(allowed) if found.get(k, 0) <= LIMIT]
    if problems:
        sys.exit("\n".join(problems))
    print(f"function lengths ok: {len(found)} functions, {len(allowed)} listed over {LIMIT} lines")


if __name__ == "__main__":
    main(sys.argv[1])
