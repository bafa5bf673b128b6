#!/usr/bin/python3
"""The results page: DIR/index.html from every DIR/NAME.claims.json that `kestrel reproduce` wrote (standard library
only; plain HTML and CSS, no script but an onerror marker on images). Usage: index_page.py DIR [NAME ...] (the order)."""
import glob
import html
import json
import math
import os
import sys
import tempfile
import time

VERDICTS = ["holds", "not contradicted", "differs", "contradicted"]
PAPERS = {"CRT": "CRT (Chefs' Random Tables)", "DERF": "DERF (Dense-Exponential RFs)", "HRF": "HRF (Hybrid RFs)",
          "DARK": "DARK (DarkFormer)", "LUNA": "LUNA (learned feature maps)",
          "REID": "Reid et al. 2023 (simplex RFs)"}
OTHER = "other (kestrel's own checks, issues)"

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1300px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.5em; vertical-align: top; text-align: left; }
th { background: #eee; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.quick { background: #fff3cd; border: 2px solid #d39e00; padding: 0.6em 1em; font-weight: bold; }
.v-holds { background: #d9f2d9; } .v-not-contradicted { background: #e3ecf9; }
.v-differs { background: #fbe0c8; } .v-contradicted { background: #f6c6c6; }
section.repro { border-top: 3px solid #555; margin-top: 2em; padding-top: 0.8em; }
figure { margin: 0.5em 0; } figure img { max-width: 100%; border: 1px solid #ccc; }
.meta { font-size: 0.9em; color: #444; } pre { font-size: 0.8em; background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
.missing { color: #b00; font-weight: bold; } td.zero { color: #999; }
.tag-quick { background: #fff3cd; border: 1px solid #d39e00; border-radius: 3px; padding: 0 0.3em; font-size: 0.8em;
  font-weight: bold; vertical-align: middle; }
"""


def esc(x):
    return html.escape(str(x), quote=True)


def num(x):
    """4 significant digits; whole numbers below 1e6 whole (as the Markdown tables: experiment.cpp format_number)."""
    if x is None:
        return ""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == math.trunc(x) and abs(x) < 1e6:
        return f"{x:.0f}"
    return f"{x:.4g}"


def secs_text(secs):
    """Seconds as recorded (one decimal): under 0.1 s reads "< 0.1", not 0."""
    if secs is None:
        return "not recorded"
    return "&lt; 0.1" if secs < 0.1 else num(secs)


def paper_of(source):
    first = (source or "").split()[0].upper() if (source or "").split() else ""
    return PAPERS.get(first, OTHER)


def verdict_class(v):
    return "v-" + v.replace(" ", "-")


def load(directory, order):
    runs = []
    for path in glob.glob(os.path.join(directory, "*.claims.json")):
        with open(path, encoding="utf-8") as fh:
            run = json.load(fh)
        run.setdefault("experiment", os.path.basename(path)[: -len(".claims.json")])
        runs.append(run)
    rank = {n: i for i, n in enumerate(order)}
    runs.sort(key=lambda r: (rank.get(r["experiment"], len(rank)), r["experiment"]))
    return runs


def options_of(run):
    return run.get("provenance", {}).get("options", {})


def is_quick(run):
    return bool(options_of(run).get("quick", False))


def count_cells(counts):
    """One cell per verdict, coloured where the count is not zero."""
    return "".join(f'<td class="num {verdict_class(v) if counts.get(v, 0) else "zero"}">{counts.get(v, 0)}</td>'
                   for v in VERDICTS)


def counts_row(label, counts, extra=""):
    cells = count_cells(counts)
    return f"<tr><th>{esc(label)}</th>{cells}<td class=\"num\">{sum(counts.values())}</td>{extra}</tr>"


def summary(runs):
    by_paper, total = {}, {}
    for run in runs:
        for c in run.get("claims", []):
            p = by_paper.setdefault(paper_of(c.get("source")), {})
            p[c["verdict"]] = p.get(c["verdict"], 0) + 1
            total[c["verdict"]] = total.get(c["verdict"], 0) + 1
    head = "<tr><th>paper</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS) + "<th>claims</th></tr>"
    order = [p for p in list(PAPERS.values()) + [OTHER] if p in by_paper]
    rows = [counts_row(p, by_paper[p]) for p in order] + [counts_row("all papers", total)]
    return f'<table class="summary" id="summary">{head}{"".join(rows)}</table>'


def run_table(runs):
    head = ("<tr><th>reproduction</th><th>paper figure or table</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS)
            + "<th>claims</th><th>time (s)</th><th>sizes</th><th>protocol</th></tr>")
    rows = []
    for run in runs:
        counts = {}
        for c in run.get("claims", []):
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
        secs = run.get("seconds")
        name = run["experiment"]
        cells = count_cells(counts)
        rows.append(f'<tr><td><a href="#{esc(name)}">{esc(name)}</a></td><td>{esc(run.get("title", ""))}</td>{cells}'
                    f'<td class="num">{sum(counts.values())}</td>'
                    f'<td class="num">{secs_text(secs)}</td>'
                    f'<td>{"quick (reduced)" if is_quick(run) else "paper settings"}</td>'
                    f'<td>{esc(options_of(run).get("protocol") or "-")}</td></tr>')
    timed = [r["seconds"] for r in runs if r.get("seconds") is not None]
    total = (f'<tr><th colspan="{len(VERDICTS) + 3}">total time of the reproductions listed</th>'
             f'<td class="num">{num(sum(timed))}</td><td colspan="2"></td></tr>') if timed else ""
    return f'<table class="runs" id="runs">{head}{"".join(rows)}{total}</table>'


def measured(c):
    """The measured value, with its standard error where the reproduction states one (simulated quantities); exact
    values and quantities with the SE folded in ("mean - 3 SE") have none."""
    unc = c.get("uncertainty")
    return num(c.get("measured")) + (f" &plusmn; {num(unc)}" if unc is not None else "")


def claims_table(claims):
    head = ("<tr><th>source</th><th>the paper's statement</th><th>quantity measured</th><th>paper's value</th>"
            "<th>measured (&plusmn; 1 SE)</th><th>verdict</th><th>settings</th><th>note</th></tr>")
    rows = []
    for c in claims:
        rel = c.get("relation", "")
        if rel == "~":
            claimed = f"{num(c.get('claimed'))} &plusmn; {num(c.get('tolerance'))}"
            rule = f"holds when |measured &minus; {num(c.get('claimed'))}| &le; {num(c.get('tolerance'))}"
        else:
            claimed = f"{esc(rel)} {num(c.get('claimed'))}"
            rule = f"holds when measured {esc(rel)} {num(c.get('claimed'))}"
        cls = verdict_class(c["verdict"])
        rows.append(f'<tr class="{cls}"><td>{esc(c.get("source", ""))}</td><td>{esc(c.get("statement", ""))}</td>'
                    f'<td>{esc(c.get("quantity", ""))}</td><td class="num" title="{rule}">{claimed}</td>'
                    f'<td class="num">{measured(c)}</td><td><b>{esc(c["verdict"])}</b></td>'
                    f'<td>{esc(c.get("settings", ""))}</td><td>{esc(c.get("note", ""))}</td></tr>')
    return f'<table class="claims">{head}{"".join(rows)}</table>'


def section(directory, run):
    name = run["experiment"]
    prov = run.get("provenance", {})
    opts = options_of(run)
    png = name + ".png"
    # The onerror marker lets a headless browser (tests/browser_test.py) see an image that did not load.
    fig = (f'<figure><a href="{esc(png)}"><img src="{esc(png)}" alt="figure of {esc(name)}" '
           f'onerror="this.setAttribute(\'data-broken\', \'1\')"></a>'
           f'<figcaption class="meta">{esc(png)} (click for the full size)</figcaption></figure>')
    if not os.path.exists(os.path.join(directory, png)):
        fig = f'<p class="missing">{esc(png)} is missing (the plot script failed or was not run).</p>' + fig
    secs = run.get("seconds")
    protocol = opts.get("protocol") or ""
    desc = run.get("protocol_description", "")
    links = " | ".join(f'<a href="{esc(name + ext)}">{esc(name + ext)}</a>'
                       for ext in (".h5", ".claims.json", ".claims.md") if os.path.exists(os.path.join(directory,
                                                                                                    name + ext)))
    quick = ' <span class="tag-quick">--quick: reduced sizes, values differ</span>' if is_quick(run) else ""
    return f"""<section class="repro" id="{esc(name)}">
<h2>{esc(name)}: {esc(run.get("title", ""))}{quick}</h2>
<p class="meta">{"quick (reduced sizes)" if is_quick(run) else "paper settings"}, seed {esc(opts.get("seed", ""))},
protocol <b>{esc(protocol or "(one protocol)")}</b>{": " + esc(desc) if desc else ""};
computed in {secs_text(secs) + " s" if secs is not None else "(time not recorded)"} on {esc(prov.get("created_utc", ""))},
git {esc(str(prov.get("git_revision", ""))[:12])}. Files: {links}</p>
{fig}
{claims_table(run.get("claims", []))}
<details><summary>options and command</summary>
<pre>{esc(prov.get("command", ""))}

{esc(json.dumps(opts, indent=2))}</pre></details>
</section>"""


def page(directory, runs):
    quick = [r["experiment"] for r in runs if is_quick(r)]
    if quick and len(quick) == len(runs):
        banner = ('<p class="quick" id="quick-banner">Quick run (<code>kestrel reproduce --quick</code>): every '
                  'reproduction on this page ran at reduced sizes. Measured values differ from the papers\' and from '
                  'paper settings, and differences in the verdicts are expected. Run <code>bash scripts/main.sh</code> '
                  'for the paper settings.</p>')
    elif quick:
        banner = (f'<p class="quick" id="quick-banner">Mixed: {len(quick)} of {len(runs)} reproductions on this page '
                  f'ran at reduced sizes (<code>--quick</code>: {esc(", ".join(quick))}); their values and verdicts '
                  'are not those of the paper settings.</p>')
    else:
        banner = ""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    body = "\n".join(section(directory, r) for r in runs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kestrel: reproductions of the papers' figures and claims</title>
<style>{CSS}</style></head>
<body>
<h1>kestrel: which of the papers' claims hold, and where kestrel disagrees</h1>
{banner}
<p class="meta">{len(runs)} reproductions in this directory, page written {stamp} by
<code>experiments/index_page.py</code> (<code>kestrel reproduce</code> rewrites it after every reproduction).
Verdicts: <span class="v-holds">holds</span>; <span class="v-not-contradicted">not contradicted</span> (a claim the
data can only fail to contradict); <span class="v-differs">differs</span> and
<span class="v-contradicted">contradicted</span>, each with a note. Hover a paper's value for its rule. A measured value has &plusmn; 1 SE where it was simulated
and the SE is not already part of the quantity (as in "mean &minus; 3 SE").</p>
<h2>Claims by verdict</h2>
{summary(runs)}
<h2>Reproductions</h2>
{run_table(runs)}
{body}
</body></html>
"""


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: index_page.py DIR [NAME ...]")
    directory = sys.argv[1]
    runs = load(directory, sys.argv[2:])
    out = os.path.join(directory, "index.html")
    # A temporary file of this process's own (two runs with --force may write the page at the same moment), replaced
    # atomically: the page is always one run's whole page.
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="index.html.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page(directory, runs))
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as open() would have made it (mkstemp's file is private)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


if __name__ == "__main__":
    main()
