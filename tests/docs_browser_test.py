#!/usr/bin/python3
"""The documentation site in a real browser (issue #50): every page of the built site (scripts/docs.sh) has its
internal links and images on disk, and the index and the command-line reference load in headless Chromium (Debian's
chromium) with no console message (a missing image or script is one) and show what they should. Screenshots stay in
WORKDIR. Usage: docs_browser_test.py HTML_DIR WORKDIR"""
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


class Refs(HTMLParser):
    """The page's links (href), images (src), scripts and stylesheets, and its ids."""

    def __init__(self):
        super().__init__()
        self.links, self.assets, self.ids = [], [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("img", "script") and a.get("src"):
            self.assets.append(a["src"])
        if tag == "link" and a.get("rel") == "stylesheet":
            self.assets.append(a["href"])


def refs(path):
    r = Refs()
    with open(path, encoding="utf-8") as fh:
        r.feed(fh.read())
    return r


def chromium(args):
    """Runs headless Chromium; returns (stdout, its console lines)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("FAIL  no chromium on PATH (scripts/setup.sh installs Debian's chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0", "--allow-file-access-from-files"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        check(False, f"chromium exits 0 ({' '.join(args[-2:])}): {r.stderr[-1000:]}")
    return r.stdout, [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]


# Chromium logs no console message for an image that fails to load, so a copy of the page next to it (same relative
# paths) gets this script, which marks such images; the DOM dump then shows them.
MARK = ("<script>addEventListener('load', () => { for (const i of document.images) "
        "if (!i.complete || i.naturalWidth === 0) i.setAttribute('data-broken', '1'); });</script>")


def broken_images(path):
    """The images of the page at path that do not load in the browser (their src)."""
    probe = os.path.join(os.path.dirname(path), "_probe_" + os.path.basename(path))
    with open(path, encoding="utf-8") as fh, open(probe, "w", encoding="utf-8") as out:
        out.write(fh.read().replace("</body>", MARK + "</body>"))
    try:
        dom, _ = chromium(["--virtual-time-budget=5000", "--dump-dom", "file://" + probe])
    finally:
        os.remove(probe)
    return re.findall(r'<img[^>]*src="([^"]*)"[^>]*data-broken="1"', dom), dom.count("<img")


def main():
    html, work = map(os.path.abspath, sys.argv[1:3])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pages = sorted(os.path.relpath(os.path.join(d, f), html) for d, _, fs in os.walk(html) for f in fs
                   if f.endswith(".html") and "_static" not in d)
    for need in ("index.html", "cli.html", "api.html", "formats.html", "getting-started.html", "advise.html"):
        check(need in pages, f"the site has {need}")
    if failures:
        return 1
    # Every internal link and asset of every page resolves to a file, and a #fragment to an id on that page.
    broken = []
    for page in pages:
        here = os.path.dirname(os.path.join(html, page))
        r = refs(os.path.join(html, page))
        for ref in r.links + r.assets:
            u = urlsplit(ref)
            if u.scheme or ref.startswith("//"):
                continue
            target = os.path.normpath(os.path.join(here, unquote(u.path))) if u.path else os.path.join(html, page)
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.isfile(target):
                broken.append(f"{page}: {ref}")
            elif u.fragment and target.endswith(".html") and u.fragment not in refs(target).ids:
                broken.append(f"{page}: {ref} (no such id)")
    check(not broken, f"every internal link and image of the {len(pages)} pages resolves (broken: {broken[:10]})")

    # In the browser: the DOM after loading, no console message; a screenshot of each.
    for page, must in (("index.html", ["Getting started", "Command-line reference", "Python API"]),
                       ("cli.html", ["kestrel advise", "--target", "--estimators", "kestrel sweep merge"])):
        url = "file://" + os.path.join(html, page)
        dom, console = chromium(["--virtual-time-budget=5000", "--dump-dom", url])
        check(all(m in dom for m in must), f"{page} in the browser shows {must}")
        check(not console, f"{page}: no console messages: " + " | ".join(console[:5]))
        shot = os.path.join(work, page.replace(".html", ".png"))
        _, console = chromium([f"--screenshot={shot}", "--window-size=1280,1600", url])
        check(os.path.isfile(shot) and os.path.getsize(shot) > 20_000 and not console, f"screenshot {shot}")
    for page in pages:  # every image of every page loads in the browser
        bad, n = broken_images(os.path.join(html, page))
        if n:
            check(not bad, f"{page}: its {n} images load in the browser (broken: {bad})")
    # The check itself: a missing image is caught.
    probe = os.path.join(work, "probe.html")
    with open(probe, "w", encoding="utf-8") as fh:
        fh.write('<!doctype html><html><body><img src="missing.png"></body></html>')
    check(broken_images(probe)[0] == ["missing.png"], "negative control: a missing image is found")
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
