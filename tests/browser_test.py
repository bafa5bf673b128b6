#!/usr/bin/python3
"""The results page in a real browser (issue #38): `kestrel reproduce all --quick`, then results/index.html in headless
Chromium (Debian's chromium). Fails on a missing image, a console message, or a reproduction without its section.
Usage: browser_test.py KESTREL_CLI WORKDIR [QUICK_RESULTS]: with QUICK_RESULTS (the outputs of that run, and its stdout
in QUICK_RESULTS.stdout: ctest's reproduce_all_quick fixture) the run is not repeated. Screenshots stay in WORKDIR."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


class Page(HTMLParser):
    """The page's sections (id), images (src, data-broken) and whether it has the quick banner."""

    def __init__(self):
        super().__init__()
        self.sections, self.images, self.quick_banner = [], [], False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "repro" in (a.get("class") or "").split():
            self.sections.append(a.get("id"))
        if tag == "img":
            self.images.append((a.get("src"), a.get("data-broken")))
        if a.get("id") == "quick-banner":
            self.quick_banner = True


def parse(text):
    p = Page()
    p.feed(text)
    return p


def chromium(args, timeout=120):
    """Runs headless Chromium; returns (stdout, the console lines of its log)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("FAIL  no chromium on PATH (scripts/setup.sh installs Debian's chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0", "--allow-file-access-from-files"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    # Chromium logs every console message (log, warn, error, uncaught exceptions) as INFO:CONSOLE; the page has no
    # script of its own, so any console line is a failure.
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    if r.returncode != 0:
        failures.append(f"chromium exited with {r.returncode}: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return r.stdout, console


def trim(path):
    """Cuts the white below the page's end off a screenshot (Debian's python3-pil; left as it is without it)."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        return
    with Image.open(path) as im:
        box = ImageOps.invert(im.convert("L")).getbbox()
        if box and box[3] < im.height - 10:
            im.crop((0, 0, im.width, box[3] + 10)).save(path)
        elif box:
            print(f"note: the page is taller than the screenshot ({im.height} px)")


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: browser_test.py KESTREL_CLI WORKDIR [QUICK_RESULTS]")
    cli, work = sys.argv[1], os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "results")
    os.makedirs(work)

    if len(sys.argv) == 4:  # the fixture's run: copied, since this test reruns one reproduction into it
        given = os.path.abspath(sys.argv[3])
        shutil.copytree(given, out)
        with open(given + ".stdout", encoding="utf-8") as fh:
            stdout = fh.read()
        page_line = f"all results on one page: {os.path.join(given, 'index.html')}"
    else:
        t0 = time.time()
        run = subprocess.run([cli, "reproduce", "all", "--quick", "--quiet", "--out", out], capture_output=True,
                             text=True)
        print(f"reproduce all --quick: {time.time() - t0:.0f} s, exit {run.returncode}", flush=True)
        if not check(run.returncode == 0, "kestrel reproduce all --quick succeeds"):
            print(run.stderr[-3000:])
            return 1
        stdout = run.stdout
        page_line = f"all results on one page: {os.path.join(out, 'index.html')}"
    # The registry's reproductions, from the CLI's help: the run must have done every one.
    helptext = subprocess.run([cli, "reproduce", "--help"], capture_output=True, text=True).stdout
    registry = re.search(r"Reproduction: (.*?), or all", " ".join(helptext.split())).group(1).split(", ")
    names = re.findall(r"^== ([\w.+-]+): ", stdout, flags=re.M)
    check(names == registry, f"the run reports every reproduction of the registry ({len(names)} of {len(registry)})")
    index = os.path.join(out, "index.html")
    check(page_line in stdout, "reproduce prints the page's path")
    if not check(os.path.isfile(index), "index.html written"):
        return 1
    with open(index, encoding="utf-8") as fh:
        page = parse(fh.read())
    check(page.sections == names, "one section per reproduction, in the run's order")
    check(page.quick_banner, "the page says that the run is --quick (reduced sizes)")
    for src, _ in page.images:
        path = os.path.join(out, src)
        head = open(path, "rb").read(8) if os.path.isfile(path) else b""
        check(head == b"\x89PNG\r\n\x1a\n", f"{src} on disk is a PNG")
    check({s for s, _ in page.images} == {n + ".png" for n in names}, "every reproduction's figure is on the page")
    # Issue #49: every claim that differs or is contradicted is listed at the top, linked to its row, with a note.
    with open(index, encoding="utf-8") as fh:
        text = fh.read()
    differing = [(r["experiment"], k) for r in map(lambda p: json.load(open(p, encoding="utf-8")),
                                                   glob.glob(os.path.join(out, "*.claims.json")))
                 for k, c in enumerate(r["claims"]) if c["verdict"] in ("differs", "contradicted")]
    listed = [f'href="#{n}-claim-{k + 1}"' in text and f'id="{n}-claim-{k + 1}"' in text for n, k in differing]
    check('id="disagreements"' in text and all(listed),
          f"every differing claim is listed at the top and linked to its row ({sum(listed)} of {len(differing)})")
    missing = text.count('class="missing no-note"') // 2  # marked in the list and in its row
    check(not missing, f"every differing claim has a note ({missing} without)")

    # In the browser: the DOM after loading (images that failed to load carry data-broken="1"), console messages.
    url = "file://" + index
    dom, console = chromium(["--virtual-time-budget=10000", "--dump-dom", url])
    loaded = parse(dom)
    check(loaded.sections == names, f"the browser's DOM has every section ({len(loaded.sections)})")
    broken = [s for s, b in loaded.images if b]
    check(not broken and len(loaded.images) == len(names), f"every image loads in the browser (broken: {broken})")
    check(not console, "no console messages: " + " | ".join(console[:5]))

    # Screenshots: the top of the page (the summary tables and the first figures), and the whole page in one tall
    # window (Chromium's --screenshot takes the window; scrolling to a #fragment first leaves it blank in headless mode).
    shot = os.path.join(work, "index.png")
    _, console = chromium([f"--screenshot={shot}", "--window-size=1400,4000", url])
    check(os.path.isfile(shot) and os.path.getsize(shot) > 50_000, f"screenshot {shot}")
    check(not console, "no console messages while taking the screenshot")
    full = os.path.join(work, "index-full.png")
    _, console = chromium([f"--screenshot={full}", "--window-size=1400,40000", url])
    check(os.path.isfile(full) and not console, f"screenshot of the whole page {full}")
    trim(full)

    # Rerunning one reproduction updates its section and keeps the others.
    before = {r["experiment"]: r["provenance"]["created_utc"] for r in map(
        lambda p: json.load(open(p, encoding="utf-8")), glob.glob(os.path.join(out, "*.claims.json")))}
    time.sleep(1.1)  # created_utc has a resolution of one second
    rerun = subprocess.run([cli, "reproduce", "crt-fig1", "--quick", "--quiet", "--force", "--out", out],
                           capture_output=True, text=True)
    check(rerun.returncode == 0, "rerunning crt-fig1 alone succeeds")
    with open(index, encoding="utf-8") as fh:
        text = fh.read()
    check(parse(text).sections == names, "after rerunning crt-fig1 the page still has every section")
    with open(os.path.join(out, "crt-fig1.claims.json"), encoding="utf-8") as fh:
        created = json.load(fh)["provenance"]["created_utc"]
    check(created != before.get("crt-fig1") and created in text, "crt-fig1's section shows the new run")
    check(all(before[n] in text for n in names if n != "crt-fig1"), "the other sections are kept")

    print(f"screenshots in {work} (index.png: the top, index-full.png: the whole page)")
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
