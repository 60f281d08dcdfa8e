# Shared by the benchmark scripts (benches/serve, benches/load, benches/profiles,
# benches/platforms, benches/harvest, benches/bucket, benches/postgres, benches/compare.sh):
# logging, cleanup of what they start, installing missing tools, building the binaries (the
# working tree's or a commit's), waiting for a port, the benchmark upstream, and nginx as the
# peer. Source it after setting `work` (the script's folder under target/) and `bin` (where the
# oai-bridge binary is copied).

log() { printf '== %s\n' "$*" >&2; }

# Every gateway a benchmark starts puts its admin listener (status page, /metrics) on a free
# port: its default, 127.0.0.1:8081, may be taken (a gateway left running from the README), and
# two gateways of one run would collide on it. An environment variable, not a key, so that a
# binary from before the admin listener (benches/compare.sh's BASE) ignores it.
export OAI_BRIDGE_ADMIN_LISTEN=${OAI_BRIDGE_ADMIN_LISTEN:-127.0.0.1:0}

# Processes to stop on exit; nginx is stopped through its pid file.
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# install_missing COMMAND:PACKAGE...: installs (apt-get) the package of each command that is
# not there; a command given as an absolute path is looked for at that path. nginx also counts
# as there at /usr/sbin/nginx, where Debian puts it outside a user's PATH.
install_missing() {
  local need=() pair cmd
  for pair in "$@"; do
    cmd=${pair%%:*}
    case $cmd in
      /*) [ -x "$cmd" ] && continue ;;
      nginx) { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; } && continue ;;
      *) command -v "$cmd" >/dev/null && continue ;;
    esac
    need+=("${pair#*:}")
  done
  ((${#need[@]})) || return 0
  log "installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
}

# build_binaries: oai-bridge (release, working tree, copied to $bin) and the benchmark upstream.
build_binaries() {
  log "building oai-bridge (release) and the benchmark upstream"
  timeout 1800 cargo build --release --locked --bin oai-bridge
  cp target/release/oai-bridge "$bin"
  build_server
}

# build_server: the benchmark upstream (target/bench-server/release/oai-bench-server).
build_server() {
  timeout 900 cargo build --release --locked --manifest-path benches/harvest/server/Cargo.toml \
    --target-dir target/bench-server
}

# build_rev REV DEST: oai-bridge (release) as of commit REV, not the working tree, copied to DEST
# (a copy, so that a later build cannot change what is measured). The commit's files come from
# `git archive` into target/bench-rev/<commit>/, kept; every commit builds into one target dir,
# target/bench-rev/target, apart from target/release, so the dependencies are built once. The
# build and the copy hold a lock: two scripts building two commits at once would otherwise copy
# each other's binary.
# Cargo names the workspace's units by their place in the workspace, not by the tree's path, and
# judges them fresh by their files' times, which `git archive` sets to the commit's: built after
# a newer commit, an older one looked fresh and the newer commit's binary was copied in its
# place (found 2026-11-30: a "before" binary held the "after" tree's paths). So a tree other than
# the one built last has its files' times set to now, and cargo builds it again; the binary
# must then hold the tree's path (its debug info names the folder it was built in), or the build
# stops. Each commit's binary is kept (target/bench-rev/bin/<commit>), so it is built once.
build_rev() {
  local sha tree
  sha=$(git rev-parse --verify "$1^{commit}")
  tree=target/bench-rev/$sha
  mkdir -p target/bench-rev "$(dirname "$2")"
  (
    flock 8
    if [ -x "target/bench-rev/bin/$sha" ]; then
      log "oai-bridge ${sha:0:7}: built before (target/bench-rev/bin)"
      cp "target/bench-rev/bin/$sha" "$2"
      exit 0
    fi
    if [ ! -f "$tree/Cargo.toml" ]; then
      rm -rf "$tree.tmp"
      mkdir -p "$tree.tmp"
      git archive "$sha" | tar -x -C "$tree.tmp"
      mv "$tree.tmp" "$tree"
    fi
    if [ "$(cat target/bench-rev/last 2>/dev/null)" != "$sha" ]; then
      find "$tree" -type f -exec touch {} +
    fi
    log "building oai-bridge ${sha:0:7} (release, from git archive)"
    timeout 1800 cargo build --release --locked --bin oai-bridge --manifest-path "$tree/Cargo.toml" \
      --target-dir target/bench-rev/target
    echo "$sha" >target/bench-rev/last
    grep -qaF "bench-rev/$sha" target/bench-rev/target/release/oai-bridge || {
      log "the binary built is not ${sha:0:7}'s"
      exit 1
    }
    mkdir -p target/bench-rev/bin
    cp target/bench-rev/target/release/oai-bridge "target/bench-rev/bin/$sha"
    cp "target/bench-rev/bin/$sha" "$2"
  ) 8>target/bench-rev/lock
}

wait_port() { # PORT PID LOG: until PORT listens; fails when PID exits first (showing LOG)
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; log "process for port $1 exited"; exit 1; }
    ((waited++ < 3000)) || { log "port $1 not listening after 300 s"; exit 1; }
    sleep 0.1
  done
}

# start_upstream PORT ARGS...: the benchmark upstream on PORT with ARGS (`--records N`,
# `--changed-every N`...), logging to $work/upstream.log; waits until it listens. Its pid is
# $upstream_pid, until stop_upstream.
start_upstream() {
  local port=$1
  shift
  target/bench-server/release/oai-bench-server --port "$port" "$@" 2>>"$work/upstream.log" &
  upstream_pid=$!
  pids+=("$upstream_pid")
  wait_port "$port" "$upstream_pid" "$work/upstream.log"
}
stop_upstream() { kill "${upstream_pid:-}" 2>/dev/null || true; wait "${upstream_pid:-}" 2>/dev/null || true; }

# start_nginx_peer PORT [DIRECTIVES]: nginx, one worker pinned to core 0, serving $work/www on
# PORT with gzip_static (a file's .gz sibling for clients that accept gzip), as a tuned static
# server would; DIRECTIVES go in its server block (a location of its own, say).
start_nginx_peer() {
  mkdir -p "$work/nginx-tmp"
  cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { application/xml xml; application/gzip gz; text/plain txt; }
  gzip_static on;
  gzip_vary on;
  client_body_temp_path $work/nginx-tmp;
  proxy_temp_path $work/nginx-tmp;
  fastcgi_temp_path $work/nginx-tmp;
  uwsgi_temp_path $work/nginx-tmp;
  scgi_temp_path $work/nginx-tmp;
  server { listen 127.0.0.1:$1; root $work/www; ${2:-} }
}
EOF
  taskset -c 0 "$(command -v nginx || echo /usr/sbin/nginx)" -c "$work/nginx.conf" \
    -e "$work/nginx-error.log"
  wait_port "$1" $$ /dev/null
}
