"""Numbers that the documentation's texts show, checked against the output of the commands shown beside them (issue 68
item 5): each test runs the page's own sh block (its Python line that makes the inputs, then its `kestrel advise` line
through kestrel.advise, the same library and seeds) and compares the numbers the sentence after it says."""
import os
import re
import shlex

import numpy as np
import pytest

import kestrel

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
LISTS = {"estimators", "samplers", "sums", "learned"}


def page(name):
    with open(os.path.join(DOCS, name)) as f:
        return f.read()


def sh_block(text, marker):
    """The fenced sh block of a page that holds `marker`, with continuation lines joined."""
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        if marker in block:
            return re.sub(r"\\\n\s*", " ", block)
    raise AssertionError(f"no sh block with {marker!r}")


def run_block(block, where):
    """Runs the block's `python3 -c` line in `where` and its `kestrel advise` line as kestrel.advise; the report."""
    parts = [part.strip() for part in block.split("&&")]
    make = parts[0]
    advise = next(part for part in parts if part.startswith("build/bin/kestrel advise"))
    args = shlex.split(make)
    assert args[:2] == ["/usr/bin/python3", "-c"], make
    cwd = os.getcwd()
    os.chdir(where)
    try:
        exec(args[2], {})
        words = shlex.split(advise.split("  #")[0])
        assert words[:2] == ["build/bin/kestrel", "advise"], advise
        kw, arrays, i = {}, {}, 2
        while i < len(words):
            name = words[i][2:].replace("-", "_")
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True
            i += 1 if value is True else 2
            if name in ("queries", "keys", "values"):
                arrays[name] = np.load(value)
            elif name != "out":
                kw[name] = value.split(",") if name in LISTS else value if value is True else number(value)
        return kestrel.advise(arrays["queries"], arrays["keys"], arrays.get("values"), **kw)
    finally:
        os.chdir(cwd)


def number(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def row(report, estimator, sampler, head=None):
    return next(r for r in report["rows"] if r["estimator"] == estimator and r["sampler"] == sampler
                and r.get("head") == head)


def test_getting_started_first_result_names_the_m_its_text_says(tmp_path):
    text = page("getting-started.md")
    rep = run_block(sh_block(text, "mine.npy"), tmp_path)
    said = re.search(r"advise names M = (\d+) for OPRF and SDERF \((\d+) for PosRF\) for a\s+95th-percentile error of "
                     r"(\d+)%", text)
    assert said, "the sentence on the first result"
    both, pos, target = (int(g) for g in said.groups())
    assert rep["options"]["target"] == pytest.approx(target / 100)
    for est, m in (("oprf", both), ("sderf", both), ("pos", pos)):
        r = row(rep, est, "iid")
        assert (r["decision"], r["m_for_target_p95"]) == ("M", m), est


def test_causal_heads_example_names_the_m_its_text_says(tmp_path):
    text = page("advise-guide.md")
    rep = run_block(sh_block(text, "causal_heads.h5"), tmp_path)
    said = re.search(r"PosRF iid: (\d+), (\d+), (\d+) and (\d+) on the", text)
    assert said, "the sentence on PosRF's M per head"
    pos = next(s for s in rep["summary"] if s["estimator"] == "pos" and s["sampler"] == "iid")
    assert pos["m_for_target_each_head"] == [int(g) for g in said.groups()]
    best = re.search(r"the recommendation is SDERF with orthogonal features at M = (\d+)\s+for every head", text)
    assert best, "the sentence on the recommendation"
    sderf = next(s for s in rep["summary"] if s["estimator"] == "sderf" and s["sampler"] == "orthogonal")
    assert sderf["decision_every_head"] == "M" and sderf["m_for_target_every_head"] == int(best.group(1))
    assert rep["recommendation"].startswith(f"sderf (orthogonal) with M = {best.group(1)} meets the target")
    low, high = (int(g) for g in re.search(r"from position 64 alone M = (\d+) to (\d+) would do", text).groups())
    for h in range(4):
        assert low <= row(rep, "pos", "iid", h)["from"]["m_for_target_p95"] <= high, h
    # The error by position (the notes' bands): the first band's p95 over the heads spans the range the text gives
    # (rounded to whole percent), the band from 64 is within one point of the "about".
    said = re.search(r"before position 16 \(few keys seen\) is (\d+)-(\d+)%, of those from 64 about (\d+)%", text)
    assert said, "the sentence on the error by position"
    first, late, about = [], [], int(said.group(3))
    for h in range(4):
        bands = {(b["lo"], b["hi"]): b["p95"] for b in row(rep, "pos", "iid", h)["causal"]["bands"]}
        first.append(bands[(0, 16)])
        late.append(bands[(64, 256)])
    assert (round(100 * min(first)), round(100 * max(first))) == (int(said.group(1)), int(said.group(2))), first
    assert all(abs(100 * x - about) <= 1 for x in late), late


def test_readme_advise_example_names_the_m_and_the_choice_its_text_says(tmp_path):
    with open(os.path.join(DOCS, "..", "README.md")) as f:
        text = f.read()
    rep = run_block(sh_block(text, "advice.h5"), tmp_path)
    said = re.search(r"PosRF cannot reach a (\d+)% error within M = (\d+), while SDERF needs about (\d+) \(iid and "
                     r"orthogonal\s+features alike\); at their length of (\d+) that costs about (\d+)x the FLOPs of exact attention, "
                     r"so the report says to keep exact softmax\s+attention \(random features would pay from "
                     r"L > (\d+)\)", text)
    assert said, "the sentence on the example"
    target, budget, about, length, times, pays = (int(g) for g in said.groups())
    assert rep["options"]["target"] == pytest.approx(target / 100) and rep["inputs"]["Lk"] == length
    assert row(rep, "pos", "iid")["decision"] == "out of reach" and rep["options"]["budget"] == budget
    for sampler in ("iid", "orthogonal"):  # alike: within 10% of what the text says, either may come first
        s = row(rep, "sderf", sampler)
        assert s["decision"] == "M" and abs(s["m_for_target_p95"] - about) <= 0.1 * about, s
    assert rep["best"] in ("sderf", "sderf (orthogonal)") and rep["choice"] == "exact softmax", rep["recommendation"]
    sderf = row(rep, "sderf", "orthogonal" if "orthogonal" in rep["best"] else "iid")
    assert rep["recommendation"].startswith("Keep exact softmax attention")
    cost = rep["cost"]
    k = cost["m"].index(sderf["m_for_target_p95"])
    assert round(cost["rf_flops"][k] / cost["exact_flops"]) == times
    assert abs(cost["crossover_length"][k] - pays) <= 0.1 * pays


def test_learned_map_example_names_the_m_its_text_says(tmp_path):
    text = page("advise-guide.md")
    rep = run_block(sh_block(text, "learned.h5"), tmp_path)
    said = re.search(r"out of reach of (\d+)% at M = (\d+) \(their 95th-percentile\s+errors there (\d+)% to (\d+)%\), "
                     r"while the learned map is named at M = (\d+) with a held-out error of ([\d.]+)% \((\d+)% on the\s+"
                     r"sequences it was fitted on\), and it is the recommendation", text)
    assert said, "the sentence on the learned example"
    target, budget, low, high, m = (int(said.group(i)) for i in range(1, 6))
    held, train = float(said.group(6)), int(said.group(7))
    assert rep["options"]["target"] == pytest.approx(target / 100) and rep["options"]["budget"] == budget
    random = [r for r in rep["rows"] if r["sampler"] != "learned"]
    assert len(random) == 4 and all(r["decision"] == "out of reach" for r in random)
    errors = sorted(r["error_at_budget_p95"] for r in random)
    assert (round(100 * errors[0]), round(100 * errors[-1])) == (low, high), errors
    learned = row(rep, "hedgehog", "learned")
    assert (learned["decision"], learned["m_for_target_p95"]) == ("M", m)
    assert round(100 * learned["error_at_m_p95"], 1) == held
    curve = dict(zip(learned["curve"]["m"], learned["learned"]["train_p95"]))
    assert round(100 * curve[float(m)]) == train
    assert rep["recommendation"].startswith(f"hedgehog with learned features, M = {m},") and rep["choice"] == "learned features"
