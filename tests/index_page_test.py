#!/usr/bin/python3
"""experiments/index_page.py on hand-made claims files (issue #38): counts by verdict per paper and overall, HTML
escaping of formulas, 4 significant digits, the quick banner, sections kept and ordered. Usage: index_page_test.py SRC"""
import json
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
        self.tables, self.sections, self.cur, self.cell = [], [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
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


def claim(source, verdict, statement="s", measured=1.0, relation=">", claimed=0.0):
    return {"source": source, "statement": statement, "quantity": "q", "relation": relation, "claimed": claimed,
            "measured": measured, "tolerance": 0.5, "settings": "", "note": "", "holds": verdict in ("holds",
                                                                                                 "not contradicted"),
            "verdict": verdict}


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
                              dict(claim("DERF 5.1", "differs", measured=1.23456), uncertainty=0.0123456)])
        write(d, "hrf-fig1", [claim("HRF Thm 3.5", "differs"), claim("consistency", "holds"),
                              claim("HRF Fig. 1", "contradicted", measured=0.000314159)], seconds=None)
        text, t = render(d=d, src=src, order=["hrf-fig1", "crt-fig2"])
        check(t.sections == ["hrf-fig1", "crt-fig2"], f"sections in the given order ({t.sections})")
        summary = {row[0]: row[1:] for row in dict(t.tables)["summary"][1:]}
        check(summary.get("all papers") == ["2", "1", "2", "1", "6"], f"overall counts ({summary.get('all papers')})")
        check(summary.get("CRT (Chefs' Random Tables)") == ["1", "1", "0", "0", "2"], "CRT counts")
        check(summary.get("HRF (Hybrid RFs)") == ["0", "0", "1", "1", "2"], "HRF counts")
        check(summary.get("other (kestrel's own checks, issues)") == ["1", "0", "0", "0", "1"], "own checks counted apart")
        claims = [rows for name, rows in t.tables if name == "claims"]
        check(len(claims) == 2, "one claims table per reproduction")
        crt = claims[1]
        check(crt[1][1] == formula, f"the formula reads as written ({crt[1][1]!r})")
        check("|x+y|^2 &lt; 100 &amp; a &lt;b&gt; &quot;q&quot;" in text, "the formula is escaped in the HTML")
        check(crt[1][4] == "1.159e+21", f"4 significant digits ({crt[1][4]})")
        check(claims[0][3][4] == "0.0003142", f"small numbers too ({claims[0][3][4]})")
        check(crt[3][4] == "1.235 \u00b1 0.01235" and crt[2][4] == "1", f"the SE where given ({crt[3][4]}, {crt[2][4]})")
        runs = {row[0]: row for row in dict(t.tables)["runs"][1:]}
        check(runs["crt-fig2"][7] == "1.5" and runs["hrf-fig1"][7] == "not recorded", "time per reproduction")
        check('id="quick-banner"' in text and "reduced sizes" in text, "quick banner when every run is --quick")
        check('<img src="crt-fig2.png"' in text and "crt-fig2.png is missing" in text, "a missing figure is named")

        # A paper-settings rerun of one reproduction replaces its section and keeps the other.
        write(d, "crt-fig2", [claim("CRT 5.1", "holds")], quick=False)
        text, t = render(d=d, src=src, order=["hrf-fig1", "crt-fig2"])
        check(t.sections == ["hrf-fig1", "crt-fig2"], "both sections after rerunning one")
        check("Mixed: 1 of 2" in text and "hrf-fig1" in text, "a mixed page names the quick runs")
        summary = {row[0]: row[1:] for row in dict(t.tables)["summary"][1:]}
        check(summary.get("all papers") == ["2", "0", "1", "1", "4"], f"counts follow ({summary.get('all papers')})")
    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
