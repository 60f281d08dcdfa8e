#!/usr/bin/env bash
# Build times of two commits (issue 31 point 6: "build time from clean and after touching one
# file, before and after"): for each commit, from `git archive` (never the working tree), a
# clean debug build of every target a developer's `cargo test` compiles (`cargo test --no-run`),
# then the rebuild after touching one file at each level of the code: the OAI-PMH client (the
# bottom: everything above it compiles again), the sitemap writer, and the gateway's HTTP
# answers (the top: the root package alone). With RELEASE=1, a clean release build of the
# binary too (`cargo build --release --bin oai-bridge`, what `cargo run --release -- serve`
# builds first). The commits are built one after the other, BEFORE then AFTER, ROUNDS times
# (each round from a new target dir, so every clean build is clean), and the medians reported.
#
#   bash benches/build-times.sh BASE [AFTER]      # AFTER defaults to HEAD
#   ROUNDS=1 RELEASE=1 bash benches/build-times.sh a61e23a
#
# A file is touched by its modification time only (its bytes stay as they are), as an editor's
# save of an unchanged file would; Cargo then rebuilds its crate and every crate above it. The
# touched file is looked up by what it is, as the commits may keep it at different paths (the
# workspace moved the client to crates/oai-pmh, the writer to crates/files). Dependencies from
# crates.io are compiled in each clean build, as on a new machine; `CARGO_HOME`'s download
# cache is kept (the network is not what is measured). It needs a quiet machine: anything else
# compiling at the same time shows in the figures. Writes benches/build-times-RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: bash benches/build-times.sh BASE [AFTER]" >&2; exit 2; }
ROUNDS=${ROUNDS:-1}
RELEASE=${RELEASE:-0}
work=target/bench-build-times
mkdir -p "$work"
log() { printf '== %s\n' "$*" >&2; }

# The files touched, by what they are: the first path of each list that the commit has.
touched_kinds=(client writer http)
declare -A candidates=(
  [client]="crates/oai-pmh/src/client.rs src/oai/client.rs"
  [writer]="crates/files/src/sitemap.rs src/render/sitemap.rs"
  [http]="src/server/http.rs"
)

# seconds COMMAND...: runs it, prints its wall time in seconds (and fails when it fails).
seconds() {
  local start end
  start=$(date +%s.%N)
  "$@" >>"$work/cargo.log" 2>&1 || { tail -30 "$work/cargo.log" >&2; return 1; }
  end=$(date +%s.%N)
  awk "BEGIN { printf \"%.1f\", $end - $start }"
}

# measure REV ROUND: every figure of REV into $work/REV.ROUND.tsv (name, seconds).
measure() {
  local sha tree target out kind path
  sha=$(git rev-parse --verify "$1^{commit}")
  tree=$work/src-$sha
  if [ ! -f "$tree/Cargo.toml" ]; then
    rm -rf "$tree.tmp" && mkdir -p "$tree.tmp"
    git archive "$sha" | tar -x -C "$tree.tmp"
    mv "$tree.tmp" "$tree"
  fi
  target=$work/target-$sha
  out=$work/${sha:0:7}.$2.tsv
  rm -rf "$target"
  : >"$out"
  local cargo=(cargo test --no-run --locked --manifest-path "$tree/Cargo.toml" --target-dir "$target")
  log "${sha:0:7} round $2: clean debug build (cargo test --no-run)"
  printf 'clean debug (cargo test --no-run)\t%s\n' "$(seconds "${cargo[@]}")" >>"$out"
  for kind in "${touched_kinds[@]}"; do
    path=
    for p in ${candidates[$kind]}; do [ -f "$tree/$p" ] && { path=$p; break; }; done
    [ -n "$path" ] || { log "no $kind file in ${sha:0:7}"; continue; }
    touch "$tree/$path"
    log "${sha:0:7} round $2: after touching $path"
    printf 'touch %s (%s)\t%s\n' "$kind" "$path" "$(seconds "${cargo[@]}")" >>"$out"
  done
  if [ "$RELEASE" = 1 ]; then
    log "${sha:0:7} round $2: clean release build of the binary"
    rm -rf "$target"
    printf 'clean release (oai-bridge)\t%s\n' "$(seconds cargo build --release --locked \
      --bin oai-bridge --manifest-path "$tree/Cargo.toml" --target-dir "$target")" >>"$out"
  fi
  rm -rf "$target"
}
before=$(git rev-parse --short "$1")
after=$(git rev-parse --short "${2:-HEAD}")
: >"$work/cargo.log"
for round in $(seq 1 "$ROUNDS"); do
  measure "$before" "$round"
  measure "$after" "$round"
done

python3 - "$work" "$before" "$after" "$ROUNDS" <<'EOF'
import statistics, sys
work, before, after, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def read(rev):
    figures = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{rev}.{r}.tsv"):
            name, secs = line.rstrip("\n").split("\t")
            figures.setdefault(name.split(" (")[0], []).append((name, float(secs)))
    return figures
b, a = read(before), read(after)
lines = [f"# Build times: {before} (before) and {after} (after)", "",
         f"Wall seconds, median of {rounds} round(s), by benches/build-times.sh.", "",
         "| build | before | after | after/before |", "|---|---:|---:|---:|"]
for key in b:
    if key not in a:
        continue
    mb = statistics.median(s for _, s in b[key])
    ma = statistics.median(s for _, s in a[key])
    names = f"{b[key][0][0]}" if b[key][0][0] == a[key][0][0] else f"{b[key][0][0]} / {a[key][0][0]}"
    lines.append(f"| {names} | {mb:.1f} | {ma:.1f} | {ma / mb:.2f}x |")
text = "\n".join(lines) + "\n"
open("benches/build-times-RESULTS.md", "w").write(text)
print(text)
EOF
