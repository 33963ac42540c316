#!/usr/bin/env bash
# Copies the project's diff fixtures into the fuzz corpora as `seed-*` files (committed), so
# every fuzzing run starts from real diffs. Run from anywhere; re-run when fixtures change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fixtures="$here/../fixtures"
for target in diff_parser review_pipeline; do
  mkdir -p "$here/corpus/$target"
  find "$fixtures" -name '*.diff' -not -path '*/.repo/*' | sort | while read -r f; do
    rel=${f#"$fixtures/"}
    cp "$f" "$here/corpus/$target/seed-${rel//\//__}"
  done
done
mkdir -p "$here/corpus/report_emitters"
printf '\x00\x03\x1c\x00\x02app/payments/client.py\x00`key`\x00<details>\x00@org/team' > "$here/corpus/report_emitters/seed-hostile"
