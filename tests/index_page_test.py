#!/usr/bin/python3
"""experiments/index_page.py on hand-made claims files (issues #38, #49): the papers' claims and kestrel's own checks
counted apart, every differing claim listed at the top with its note and a link to its row, HTML escaping of formulas,
4 significant digits, intervals and log quantities, settings said once, alike rows shared, the quick banner, sections
kept and ordered. Usage: index_page_test.py SRC"""
import json
import math
import os
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


class Text(HTMLParser):
    """The text of every table cell by (table class or id, row, column), and the section ids."""

    def __init__(self):
        super().__init__()
        self.tables, self.sections, self.cur, self.cell, self.ids, self.links = [], [], None, None, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "table":
            self.cur = (a.get("id") or a.get("class"), [])
            self.tables.append(self.cur)
        elif tag == "tr" and self.cur:
            self.cur[1].append([])
        elif tag in ("td", "th") and self.cur:
            self.cell = []
        elif tag == "section":
            self.sections.append(a.get("id"))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.cur[1][-1].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.cur = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def claim(source, verdict, statement="s", measured=1.0, relation=">", claimed=0.0, note="", quantity="q",
          settings="", tolerance=0.5):
    return {"source": source, "statement": statement, "quantity": quantity, "relation": relation, "claimed": claimed,
            "measured": measured, "tolerance": tolerance, "settings": settings, "note": note,
            "holds": verdict in ("holds", "not contradicted"), "verdict": verdict}


def write(d, name, claims, quick=True, seconds=1.5):
    run = {"experiment": name, "title": name.upper() + " title", "seconds": seconds, "claims": claims,
           "provenance": {"created_utc": "2026-01-01T00:00:00Z", "git_revision": "abc", "command": "kestrel x",
                          "options": {"quick": quick, "seed": 1, "protocol": ""}}}
    with open(os.path.join(d, name + ".claims.json"), "w", encoding="utf-8") as fh:
        json.dump(run, fh)


def render(src, d, order):
    subprocess.run(["/usr/bin/python3", os.path.join(src, "experiments", "index_page.py"), d] + order, check=True)
    with open(os.path.join(d, "index.html"), encoding="utf-8") as fh:
        text = fh.read()
    t = Text()
    t.feed(text)
    return text, t


def main():
    src = sys.argv[1]
    formula = "|x+y|^2 < 100 & a <b> \"q\""
    with tempfile.TemporaryDirectory() as d:
        write(d, "crt-fig2", [claim("CRT 5.1", "holds", formula, measured=1159335400523971821568.0),
                              claim("CRT Thm 4.1", "not contradicted"),
                              dict(claim("DERF 5.1", "differs", measured=1.23456, note="pixels in [0,1]"),
                                   uncertainty=0.0123456)])
        write(d, "hrf-fig1", [claim("HRF Thm 3.5", "differs", note="the printed bound has a typo"),
                              claim("consistency", "holds"),
                              claim("HRF Fig. 1", "contradicted", measured=0.000314159, note="heavy tails"),
                              claim("issue 17", "differs")], seconds=None)
        text, t = render(d=d, src=src, order=["hrf-fig1", "crt-fig2"])
        check(t.sections == ["hrf-fig1", "crt-fig2"], f"sections in the given order ({t.sections})")
        summary = {row[0]: row[1:] for row in dict(t.tables)["summary"][1:]}
        check(summary.get("all paper claims") == ["1", "1", "2", "1", "5"],
              f"the papers' claims alone ({summary.get('all paper claims')})")
        check(summary.get("CRT (Chefs' Random Tables)") == ["1", "1", "0", "0", "2"], "CRT counts")
        check(summary.get("HRF (Hybrid RFs)") == ["0", "0", "1", "1", "2"], "HRF counts")
        check(summary.get("DERF (Dense-Exponential RFs)") == ["0", "0", "1", "0", "1"], "DERF counts")
        own = {row[0]: row[1:] for row in dict(t.tables)["checks"][1:]}
        check(own == {"hrf-fig1": ["1", "0", "1", "0", "2"], "all kestrel checks": ["1", "0", "1", "0", "2"]},
              f"kestrel's own checks counted apart, by reproduction ({own})")

        # At the top: every claim that differs or is contradicted, with its note and a link to its row.
        top = dict(t.tables)["disagreements"]
        listed = [row for row in top if len(row) == 7 and row[0] != "claim"]
        check([r[0] for r in listed] == ["hrf-fig1 #1", "hrf-fig1 #3", "crt-fig2 #3", "hrf-fig1 #4"],
              f"every differing claim listed, papers' claims first ({[r[0] for r in listed]})")
        check([r[6] for r in listed[:3]] == ["the printed bound has a typo", "heavy tails", "pixels in [0,1]"],
              "each with its note")
        check("no note" in listed[3][6] and text.count('class="missing no-note"') == 2,
              "a differing claim without a note is marked, at the top and in its row")
        check(text.index('id="disagreements"') < text.index('id="summary"'), "the list comes first")
        for target in ("hrf-fig1-claim-1", "hrf-fig1-claim-3", "crt-fig2-claim-3", "hrf-fig1-claim-4"):
            check(target in t.links and target in t.ids, f"link #{target} goes to its row")

        claims = [rows for name, rows in t.tables if name == "claims"]
        check(len(claims) == 2, "one claims table per reproduction")
        crt = claims[1]
        check(crt[1][1] == formula, f"the formula reads as written ({crt[1][1]!r})")
        check("|x+y|^2 &lt; 100 &amp; a &lt;b&gt; &quot;q&quot;" in text, "the formula is escaped in the HTML")
        check(crt[1][4] == "1.159e+21", f"4 significant digits ({crt[1][4]})")
        check(claims[0][3][4] == "0.0003142", f"small numbers too ({claims[0][3][4]})")
        check(crt[3][4] == "1.235 \u00b1 0.01235" and crt[2][4] == "1", f"the SE where given ({crt[3][4]}, {crt[2][4]})")
        check("standard error of the simulation" in crt[0][4] and "interval the claim allows" in crt[0][3],
              "each column with a +- says what it means")
        runs = {row[0]: row for row in dict(t.tables)["runs"][1:]}
        check(runs["crt-fig2"][7] == "1.5" and runs["hrf-fig1"][7] == "not recorded", "time per reproduction")
        check('id="quick-banner"' in text and "reduced sizes" in text, "quick banner when every run is --quick")
        check('<img src="crt-fig2.png"' in text and "crt-fig2.png is missing" in text, "a missing figure is named")
        check("one protocol" not in text, "no placeholder for a reproduction with one protocol")

        # A paper-settings rerun of one reproduction replaces its section and keeps the other.
        write(d, "crt-fig2", [claim("CRT 5.1", "holds")], quick=False)
        text, t = render(d=d, src=src, order=["hrf-fig1", "crt-fig2"])
        check(t.sections == ["hrf-fig1", "crt-fig2"], "both sections after rerunning one")
        check("Mixed: 1 of 2" in text and "hrf-fig1" in text, "a mixed page names the quick runs")
        summary = {row[0]: row[1:] for row in dict(t.tables)["summary"][1:]}
        check(summary.get("all paper claims") == ["1", "0", "1", "1", "3"],
              f"counts follow ({summary.get('all paper claims')})")

    with tempfile.TemporaryDirectory() as d:
        # Numbers for people: settings common to every claim said once, 16-digit numbers shortened; a log interval
        # in linear units too; 60 claims alike in one row, a differing one among them in a row of its own.
        grid = "sigma in {0.01, 0.02782559402207126, 0.0774263682681127, 100}"
        log_iv = claim("HRF Table 3", "holds", "MSE within [2e-4, 1e-3]", measured=-7.712, relation="~",
                       claimed=0.5 * math.log(2e-7), tolerance=0.5 * math.log(5), quantity="log mean empirical MSE", settings=grid)
        alike = [claim("issue 34", "holds", "named M within 1.25x", measured=float(k % 2), relation="~", claimed=0,
                       quantity=f"misses, input {k}", settings=grid) for k in range(60)]
        odd = claim("issue 34", "differs", "named M within 1.25x", measured=2, relation="~", claimed=0,
                    quantity="misses, input 60", settings=grid, note="M beyond the budget")
        write(d, "advise", [log_iv] + alike + [odd])
        text, t = render(d=d, src=src, order=[])
        rows = dict(t.tables)["claims"]
        check(len(rows) == 1 + 3, f"60 claims alike share one row ({len(rows) - 1} rows)")
        check("0.02783" in text and "0.02782559402207126" not in text, "16-digit numbers shortened")
        check(text.count("0.02783") == 1 and len(rows[0]) == 7, "settings common to every claim said once")
        check(rows[1][3].startswith("[-8.517, -6.908]") and "linear: [0.0002, 0.001]" in rows[1][3]
              and "linear: 0.000447" in rows[1][4],
              f"a log interval in linear units too ({rows[1][3]})")
        check(rows[2][4].startswith("0 to 1") and "60 claims alike" in rows[2][2], f"the shared row ({rows[2][2][:40]})")
        check(t.ids.count("advise-claim-62") == 1 and rows[3][5] == "differs", "the differing one has its own row")
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
