# Sphinx configuration of kestrel's documentation site (built by scripts/docs.sh: Debian's python3-sphinx,
# python3-myst-parser and furo). The Python API is read from the built module: KESTREL_PYTHON_DIR names it.
import os
import sys

sys.path.insert(0, os.environ.get("KESTREL_PYTHON_DIR", os.path.join(os.path.dirname(__file__), "..", "build",
                                                                     "python")))
project = "kestrel"
author = "the kestrel authors"
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3
exclude_patterns = ["_build", "tools", "README.md"]
html_theme = "furo"
html_title = "kestrel"
smartquotes = False  # option names keep their two hyphens (--values, not an en dash)
autodoc_default_options = {"members": True, "undoc-members": True}


def verbatim(app, what, name, obj, options, lines):
    """Docstrings are plain text (pybind11's and the package's): shown as written, never parsed as reStructuredText."""
    if any(line.strip() for line in lines):
        lines[:] = ["::", ""] + ["    " + line for line in lines] + [""]


def bundle_furo_js(app, exception):
    """Debian's furo ships furo.js unbundled, starting with `import Gumshoe from "./gumshoe-patched.js"`, which a page's
    classic <script> cannot run (a console error, no scroll-spy). Upstream ships one bundle; this makes it: the UMD
    Gumshoe (which sets window.Gumshoe) followed by furo.js without the import."""
    scripts = os.path.join(app.outdir, "_static", "scripts")
    furo_js = os.path.join(scripts, "furo.js")
    if exception or not os.path.isfile(furo_js):
        return
    with open(furo_js, encoding="utf-8") as fh:
        text = fh.read()
    head = 'import Gumshoe from "./gumshoe-patched.js";'
    if text.startswith(head):
        with open(os.path.join(scripts, "gumshoe-patched.js"), encoding="utf-8") as fh:
            gumshoe = fh.read()
        with open(furo_js, "w", encoding="utf-8") as fh:
            fh.write(gumshoe + "\n" + text[len(head):])


def setup(app):
    app.connect("autodoc-process-docstring", verbatim)
    app.connect("build-finished", bundle_furo_js)
