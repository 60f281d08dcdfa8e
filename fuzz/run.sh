#!/usr/bin/env bash
# Runs the coverage-guided fuzz targets (cargo fuzz, libFuzzer) for a given time each.
#
#   bash fuzz/run.sh [SECONDS] [TARGET...]     # default: 60 s for each of list_records classify config platform_rows
#
# Corpora start from the seeds below and grow under fuzz/corpus/ (not committed). A crash stops the run: its input is in
# fuzz/artifacts/TARGET/; copy it into fuzz/regressions/TARGET/ and `cargo test` replays it
# (tests/it/fuzz_regressions.rs) until the bug is fixed. Installs cargo-fuzz if needed. libFuzzer
# needs a nightly compiler (sanitizer flags): the nightly toolchain when there is one, else the
# stable one with RUSTC_BOOTSTRAP=1 (the same compiler, its unstable flags allowed).
set -euo pipefail
trap 'echo "fuzz/run.sh: line $LINENO failed (exit $?)" >&2' ERR
cd "$(dirname "$0")"
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(list_records classify config platform_rows)

if grep -q '^nightly' <<<"$(rustup toolchain list 2>/dev/null)"; then
  cargo_fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  cargo_fuzz=(cargo fuzz)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# Seeds: two ListRecords pages made from the sample (fuzz/seeds/), the sample's identifiers,
# bridge.toml, each built-in platform row (src/platform/platforms.toml, one a file, with record
# values after the separator fuzzing::ROW_VALUES), and every input that once crashed a target.
mkdir -p corpus/list_records corpus/classify corpus/config corpus/platform_rows
cp seeds/list_records/*.xml ../fixtures/sample-repository.xml corpus/list_records/
i=0
# `sed -n 1,200p`, not `head -200`: head exits early, and under pipefail the SIGPIPE that sort
# may then get fails the whole script without a word.
grep -o '<dc:identifier>[^<]*</dc:identifier>' ../fixtures/sample-repository.xml | sed 's/<[^>]*>//g' | sort -u | sed -n 1,200p |
  while IFS= read -r id; do i=$((i + 1)); printf '%s' "$id" >"corpus/classify/seed-$i"; done
cp ../bridge.toml corpus/config/bridge.toml
awk -v dir=corpus/platform_rows '
  /^\[\[platform\]\]/ { n++; next }
  n > 0 { print > (dir "/row-" n) }
' ../src/platform/platforms.toml
for f in corpus/platform_rows/row-*; do
  printf '%s\n' '---' 'oai:repo.example.org:123456789/7' 'http://hdl.handle.net/123456789/7' \
    'https://repo.example.org/site/id/eprint/7/' 'https://repo.example.org/articles/x/7' \
    'https://doi.org/10.5555/x.7' >>"$f"
done
for t in list_records classify config platform_rows; do
  find "regressions/$t" -type f ! -name .keep -exec cp {} "corpus/$t/" \;
done

for t in "${targets[@]}"; do
  echo "== fuzzing $t for ${seconds}s"
  "${cargo_fuzz[@]}" run "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=262144
done
