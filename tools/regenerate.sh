#!/usr/bin/env bash
# Rebuild every kernel listed in tools/generated_specs.txt into generated/ (deterministic).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf generated
mkdir -p generated
grep -v '^#' tools/generated_specs.txt | while read -r flags; do
  [ -z "$flags" ] && continue
  python3 -m ptxgen build $flags --out generated >/dev/null
done
