#!/usr/bin/python3
"""Issue 66 item 4: every head of a model in minutes. kestrel.torch.advise_model with --pays-only on two untrained
models, against a NumPy peer (bench/attention_peer.py, written from the definitions alone) that simulates PosRF at
the capped M on every head, in one run: A (advise) then C (peer), RUNS rounds; medians and their ratio.

  vit      torchvision's ViT-B/16 (12 layers x 12 heads, L = 197, d = 64), seeded init, on CIFAR-10 test image 0
           upsampled to 224 x 224 (ImageNet normalisation);
  decoder  12 pre-norm nn.TransformerEncoderLayers (d_model 768, 12 heads, d = 64) under a causal mask, seeded init,
           on the first L = 1024 bytes of the GPL-3 text (byte and position embeddings).

advise runs with its default candidates (every estimator, iid and orthogonal) and pays_only=True: the budget is the
largest M whose random-feature attention costs fewer FLOPs than exact attention at L (98 at 197; 256 at 1024
causal). The peer measures PosRF (iid) at that M on each head with DRAWS draws on 512 rows (rmse metric, bootstrap
SE) and so checks advise's pos (iid) decision on every head: "out of reach" is contradicted where the peer's p95 +
2 SE is below the target, a named M where the peer's p95 - 2 SE at the cap is above it.
Needs python3-torchvision (a bench dependency, not installed by scripts/setup.sh).
usage: /usr/bin/python3 bench/model.py [--models vit,decoder] [--runs N] [--draws R] [--out FILE.md]"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(os.environ.get("KESTREL_BENCH_BUILD", os.path.join(ROOT, "build")), "python"))
import attention_peer  # noqa: E402  (the independent peer)
import kestrel  # noqa: E402
import kestrel.torch as kt  # noqa: E402


def vit():
    try:
        import torchvision
    except ImportError:
        sys.exit("bench/model.py: the vit model needs torchvision: apt-get install python3-torchvision (or --models "
                 "decoder)")
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    raw = np.fromfile(os.path.join(kestrel.default_data_dir(), "cifar10", "test_batch.bin"), np.uint8, 3073, offset=0)
    img = torch.tensor(raw[1:].reshape(1, 3, 32, 32) / 255.0, dtype=torch.float32)
    img = torch.nn.functional.interpolate(img, size=224, mode="bilinear", align_corners=False)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    return model, ((img - mean[:, None, None]) / std[:, None, None],)


class Decoder(torch.nn.Module):
    def __init__(self, L):
        super().__init__()
        self.emb, self.pos = torch.nn.Embedding(256, 768), torch.nn.Embedding(L, 768)
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True, norm_first=True)
        self.body = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)

    def forward(self, x):
        mask = torch.triu(torch.full((x.shape[1], x.shape[1]), float("-inf")), 1)
        return self.body(self.emb(x) + self.pos(torch.arange(x.shape[1])), mask=mask)


def decoder(L=1024):
    torch.manual_seed(0)
    text = open("/usr/share/common-licenses/GPL-3", "rb").read()[:L]
    return Decoder(L).eval(), (torch.tensor(list(text), dtype=torch.long)[None],)


def peer(Q, K, V, causal, M, draws, target):
    """PosRF (iid) at M on every head of the stacks [layers, heads, L, d] (q.k the logits: the peer divides by
    d^(1/4), so it is given q d^(1/4)); returns per head (p95, se)."""
    d = Q.shape[-1]
    out = []
    for l in range(Q.shape[0]):
        for h in range(Q.shape[1]):
            r = attention_peer.posrf_attention_error(Q[l, h] * d ** 0.25, K[l, h] * d ** 0.25, V[l, h], M, "iid",
                                                     draws, seed=1000 * l + h, rows=min(512, Q.shape[2]), boot=100,
                                                     causal=causal)
            out.append((r["p95"], r["p95_se"]))
    return out


def one_model(name, make, runs, draws):
    model, batch = make()
    Q, K, V, causal, _ = kt.stack(kt.capture(model, batch))
    lines, a_times, c_times = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        rep = kt.advise_model(model, batch, pays_only=True)
        a_times.append(time.perf_counter() - t0)
        M = rep["budget_considered"]
        t0 = time.perf_counter()
        checked = peer(Q, K, V, causal, M, draws, rep["options"]["target"])
        c_times.append(time.perf_counter() - t0)
    target = rep["options"]["target"]
    pos = next(s for s in rep["summary"] if s["estimator"] == "pos" and s["sampler"] == "iid")
    contradicted = 0
    for dec, m, (p95, se) in zip(pos["decision_each_head"], pos["m_for_target_each_head"], checked):
        contradicted += (dec == "out of reach" and p95 + 2 * se < target) or (m and p95 - 2 * se > target)
    choices = [h["choice"] for h in rep["heads"]] if "heads" in rep else []
    a, c = statistics.median(a_times), statistics.median(c_times)
    H = Q.shape[0] * Q.shape[1]
    lines.append(f"| {name}: `advise_model(pays_only=True)`, {H} heads, L = {Q.shape[2]}{', causal' if causal else ''}"
                 f", every default candidate | {a:.1f} | {min(a_times):.1f} | {max(a_times):.1f} |")
    lines.append(f"| {name}: NumPy peer, PosRF iid at M = {M} on the {H} heads, {draws} draws | {c:.1f} | "
                 f"{min(c_times):.1f} | {max(c_times):.1f} |")
    ratio = statistics.median(x / y for x, y in zip(a_times, c_times))
    peer_p95 = [p for p, _ in checked]
    words = (f"{name}: budget M = {M} (pays_only), recommendation: {rep['recommendation'][:300]}... "
             f"pos (iid) decisions: {dict((k, pos['decision_each_head'].count(k)) for k in set(pos['decision_each_head']))}; "
             f"the peer's p95 at M = {M}: median {np.median(peer_p95):.3g}, min {min(peer_p95):.3g} "
             f"(target {target}); decisions the peer contradicts: {contradicted} of {H}; "
             f"median ratio advise / peer {ratio:.2f}; heads' choices {dict((k, choices.count(k)) for k in set(choices))}.")
    return lines, words


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vit,decoder")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--draws", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "tmp", "model.md"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    makes = {"vit": vit, "decoder": decoder}
    table = ["| command | median s | min | max |", "|---|---:|---:|---:|"]
    notes = []
    for name in a.models.split(","):
        lines, words = one_model(name, makes[name], a.runs, a.draws)
        table += lines
        notes.append(words)
        print("\n".join(lines), words, sep="\n", flush=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("# Every head of a model (bench/model.py)\n\n" + "\n".join(table) + "\n\n" + "\n\n".join(notes) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
