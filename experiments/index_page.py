#!/usr/bin/python3
"""The results page: DIR/index.html from every DIR/NAME.claims.json that `kestrel reproduce` wrote (standard library
only; plain HTML and CSS, no script but an onerror marker on images). Usage: index_page.py DIR [NAME ...] (the order)."""
import glob
import html
import json
import math
import os
import re
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
.lin, .colnote { font-size: 0.85em; color: #555; font-weight: normal; } th.part { background: #ddd; }
td.no-note { background: #f6c6c6; } details ul { margin: 0.3em 0; padding-left: 1.2em; }
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
        try:
            with open(path, encoding="utf-8") as fh:
                run = json.load(fh)
            if not isinstance(run, dict) or not isinstance(run.get("claims"), list):
                raise ValueError("JSON without a claims list")
        except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
            why = "not JSON" if isinstance(e, (json.JSONDecodeError, UnicodeDecodeError)) else str(e)
            name = os.path.basename(path)[: -len(".claims.json")]
            print(f"index_page.py: '{path}' is not a kestrel claims file ({why}): the results page is made from every "
                  f"NAME.claims.json in '{directory}'; remove it, or rerun `kestrel reproduce {name} --force` to write "
                  "it anew", file=sys.stderr)
            sys.exit(2)
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


def tally(claims):
    counts = {}
    for c in claims:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    return counts


def is_paper_claim(c):
    return paper_of(c.get("source")) != OTHER


def summary(runs):
    """Two tables: the papers' claims by paper, and kestrel's own checks (consistency with simulation, the issues'
    acceptance checks) by reproduction; never added together."""
    by_paper, checks = {}, {}
    for run in runs:
        for c in run.get("claims", []):
            if is_paper_claim(c):
                by_paper.setdefault(paper_of(c.get("source")), []).append(c)
            else:
                checks.setdefault(run["experiment"], []).append(c)
    head = lambda first: (f"<tr><th>{first}</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS)
                          + "<th>total</th></tr>")
    order = [p for p in PAPERS.values() if p in by_paper]
    papers = [counts_row(p, tally(by_paper[p])) for p in order]
    papers.append(counts_row("all paper claims", tally([c for p in order for c in by_paper[p]])))
    own = [counts_row(n, tally(cs)) for n, cs in checks.items()]
    own.append(counts_row("all kestrel checks", tally([c for cs in checks.values() for c in cs])))
    return ('<h3>The papers\' claims</h3>\n'
            f'<table class="summary" id="summary">{head("paper")}{"".join(papers)}</table>\n'
            '<h3>kestrel\'s own checks</h3>\n<p class="meta">Not claims of the papers: kestrel\'s methods against '
            'simulation and the acceptance checks of its issues, counted apart.</p>\n'
            f'<table class="summary" id="checks">{head("reproduction")}{"".join(own)}</table>')


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


LONG_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?:e[-+]?\d+)?")


def human(text):
    """Text for people: a number written with more than 4 decimals (a 16-digit sigma) is shortened to 4 significant
    digits."""
    return LONG_NUMBER.sub(lambda m: num(float(m.group(0))), str(text or ""))


def is_log(c):
    """A quantity that is a natural log ("log mean empirical MSE", "log(Var_ort / Var_iid)"): the page also gives its
    values in linear units."""
    return (c.get("quantity") or "").startswith("log")


def linear(x):
    """exp(x) to 3 significant digits (a log quantity's value in linear units), or "" where it would overflow."""
    return f"{math.exp(x):.3g}" if x is not None and math.isfinite(x) and abs(x) < 700 else ""


def measured(c):
    """The measured value, with its standard error where the reproduction states one (simulated quantities); exact
    values and quantities with the SE folded in ("mean - 3 SE") have none."""
    unc = c.get("uncertainty")
    text = num(c.get("measured")) + (f" &plusmn; {num(unc)}" if unc is not None else "")
    if is_log(c) and linear(c.get("measured")):
        text += f'<br><span class="lin">linear: {linear(c.get("measured"))}</span>'
    return text


def claimed(c):
    """The paper's value: a bound (> c, < c) or, for "~", the interval [c - t, c + t] it allows (t: kestrel's
    reading of the paper's words, or half the paper's own interval), in linear units too for a log quantity."""
    rel, value = c.get("relation", ""), c.get("claimed")
    if rel != "~":
        return f"{esc(rel)} {num(value)}"
    lo, hi = float(value) - float(c.get("tolerance") or 0), float(value) + float(c.get("tolerance") or 0)
    text = f"[{num(lo)}, {num(hi)}]"
    if is_log(c) and linear(lo) and linear(hi):
        text += f'<br><span class="lin">linear: [{linear(lo)}, {linear(hi)}]</span>'
    return text


def rule(c):
    rel = c.get("relation", "")
    if rel == "~":
        return f"holds when |measured &minus; {num(c.get('claimed'))}| &le; {num(c.get('tolerance'))}"
    return f"holds when measured {esc(rel)} {num(c.get('claimed'))}"


def claim_id(name, k):
    return f"{name}-claim-{k + 1}"


def differing(c):
    return c["verdict"] in ("differs", "contradicted")


def note_cell(c):
    """A differing claim says why; one without a note is marked as the bug it is."""
    if not c.get("note") and differing(c):
        return '<td class="missing no-note">no note: why it differs is not recorded (a bug)</td>'
    return f'<td class="note">{esc(human(c.get("note", "")))}</td>'


COLUMNS = ("<th>source</th><th>the paper's statement</th><th>quantity measured</th>"
           "<th>paper's value<br><span class=\"colnote\">a bound, or [low, high]: the interval the claim allows "
           "(a tolerance kestrel reads into the paper's words, or the paper's own range); hover for the rule"
           "</span></th>"
           "<th>measured<br><span class=\"colnote\">&plusmn; 1 standard error of the simulation, where simulated"
           "</span></th><th>verdict</th>")


def common_settings(claims):
    settings = {c.get("settings", "") for c in claims}
    return settings.pop() if len(settings) == 1 else None


def group_key(c):
    """Claims that hold and say the same thing of different inputs (advise: one per input and sampler) share a row."""
    return (c.get("source"), c.get("statement"), c.get("relation"), c.get("claimed"), c.get("tolerance"),
            c["verdict"], c.get("note", ""))


GROUP_MIN = 3  # this many claims alike share one row


def claims_table(name, claims):
    """The claims of one reproduction: settings common to all are said once above the table; a claim that differs has
    a row (and an anchor) of its own; claims that hold and differ only in their input share one row."""
    common = common_settings(claims)
    groups = {}
    for k, c in enumerate(claims):
        key = ("single", k) if differing(c) else group_key(c)
        groups.setdefault(key, []).append(k)
    head = f"<tr>{COLUMNS}{'' if common is not None else '<th>settings</th>'}<th>note</th></tr>"
    rows = []
    for ks in groups.values():
        if len(ks) < GROUP_MIN:
            rows += [claim_row(name, k, claims[k], common is None) for k in ks]
        else:
            rows.append(group_row(name, ks, claims, common is None))
    above = f'<p class="meta settings">Settings of every claim below: {esc(human(common))}</p>' if common else ""
    return f'{above}<table class="claims">{head}{"".join(rows)}</table>'


def claim_row(name, k, c, with_settings):
    settings = f'<td>{esc(human(c.get("settings", "")))}</td>' if with_settings else ""
    return (f'<tr class="{verdict_class(c["verdict"])}" id="{esc(claim_id(name, k))}"><td>{esc(c.get("source", ""))}'
            f'</td><td>{esc(c.get("statement", ""))}</td><td>{esc(c.get("quantity", ""))}</td>'
            f'<td class="num" title="{rule(c)}">{claimed(c)}</td><td class="num">{measured(c)}</td>'
            f'<td><b>{esc(c["verdict"])}</b></td>{settings}{note_cell(c)}</tr>')


def group_row(name, ks, claims, with_settings):
    """One row for claims alike: the range of the measured values, and each claim's quantity and value on demand."""
    cs = [claims[k] for k in ks]
    c = cs[0]
    values = [x.get("measured") for x in cs]
    lo, hi = min(values), max(values)
    value = num(lo) if lo == hi else f"{num(lo)} to {num(hi)}"
    items = "".join(f'<li id="{esc(claim_id(name, k))}">{esc(claims[k].get("quantity", ""))}: {measured(claims[k])}'
                    + (f' ({esc(human(claims[k].get("settings", "")))})' if with_settings else "") + "</li>"
                    for k in ks)
    quantity = (f'<details><summary>{len(cs)} claims alike: {esc(c.get("quantity", ""))}, ...</summary>'
                f'<ul>{items}</ul></details>')
    settings = "<td>per claim (listed)</td>" if with_settings else ""
    return (f'<tr class="{verdict_class(c["verdict"])} group"><td>{esc(c.get("source", ""))}</td>'
            f'<td>{esc(c.get("statement", ""))}</td><td>{quantity}</td>'
            f'<td class="num" title="{rule(c)}">{claimed(c)}</td><td class="num">{value}<br>'
            f'<span class="lin">all {len(cs)}</span></td><td><b>{esc(c["verdict"])}</b></td>{settings}'
            f'{note_cell(c)}</tr>')


def disagreements(runs):
    """Every claim that differs or is contradicted, papers' claims first, each with its note and a link to its row."""
    def rows(pick):
        out = []
        for run in runs:
            name = run["experiment"]
            for k, c in enumerate(run.get("claims", [])):
                if differing(c) and pick(c):
                    out.append(f'<tr class="{verdict_class(c["verdict"])}"><td><a href="#{esc(claim_id(name, k))}">'
                               f'{esc(name)} #{k + 1}</a></td><td>{esc(c.get("source", ""))}</td>'
                               f'<td>{esc(c.get("statement", ""))}</td>'
                               f'<td class="num" title="{rule(c)}">{claimed(c)}</td><td class="num">{measured(c)}</td>'
                               f'<td><b>{esc(c["verdict"])}</b></td>{note_cell(c)}</tr>')
        return out
    paper, own = rows(is_paper_claim), rows(lambda c: not is_paper_claim(c))
    head = ("<tr><th>claim</th><th>source</th><th>statement</th><th>paper's value</th><th>measured</th>"
            "<th>verdict</th><th>why (the note)</th></tr>")
    span = '<tr><th colspan="7" class="part">{}</th></tr>'
    body = ([span.format(f"the papers' claims ({len(paper)})")] + paper
            + [span.format(f"kestrel's own checks ({len(own)})")] + own)
    if not paper and not own:
        return '<p id="disagreements">Every claim on this page holds or is not contradicted.</p>'
    return f'<table class="claims" id="disagreements">{head}{"".join(body)}</table>'


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
<p class="meta">{"quick (reduced sizes)" if is_quick(run) else "paper settings"}, seed {esc(opts.get("seed", ""))}{
", protocol <b>" + esc(protocol) + "</b>" if protocol else ""}{": " + esc(desc) if desc else ""};
computed in {secs_text(secs) + " s" if secs is not None else "(time not recorded)"} on {esc(prov.get("created_utc", ""))},
git {esc(str(prov.get("git_revision", ""))[:12])}. Files: {links}</p>
{fig}
{claims_table(name, run.get("claims", []))}
<details><summary>options and command</summary>
<pre>{esc(prov.get("command", ""))}

{esc(json.dumps(opts, indent=2))}</pre></details>
</section>"""


# The generator tag in the head marks the page as kestrel's: `kestrel reproduce` replaces no DIR/index.html without it
# unless --force (check_index_page in experiments/experiment.cpp).
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
<meta name="generator" content="kestrel results page">
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
<span class="v-contradicted">contradicted</span>, each with a note saying why. A paper's value is a bound
or the interval [low, high] the claim allows (hover it for the rule); a measured value has &plusmn; 1 standard error
where it was simulated and the SE is not already part of the quantity (as in "mean &minus; 3 SE"). Logs are natural;
a log quantity's values are also given in linear units.</p>
<h2>Where the measurements differ from the claims, and why</h2>
{disagreements(runs)}
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
