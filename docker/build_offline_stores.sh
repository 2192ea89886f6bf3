#!/usr/bin/env bash
# Build Redis and PostgreSQL images with no registry (CI and this project's machines cannot pull redis:7 or
# postgres:15) from this host's Debian binaries, on top of the offline Python base (glibc, /bin/sh):
#   azr-redis:offline     redis-server + redis-cli (Debian's redis-server package)
#   azr-postgres:offline  PostgreSQL 15 (Debian's postgresql package) with an entrypoint that honours the official
#                         image's POSTGRES_USER / POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) / POSTGRES_DB /
#                         PGDATA on first start.
# Use them with compose: REDIS_IMAGE=azr-redis:offline POSTGRES_IMAGE=azr-postgres:offline docker compose ...
# Limits: same major versions as the host packages; only what our compose file uses (no init scripts directory,
# no POSTGRES_INITDB_ARGS).
#
# Usage: build_offline_stores.sh [--force]   (idempotent: exits at once when both tags exist, unless --force)
# Env:   DOCKER (client binary), BASE_IMAGE (default azr-python-base:3.11, built when missing).
set -euo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; fi
here="$(cd "$(dirname "$0")" && pwd)"
docker="${DOCKER:-$( [[ -x /usr/bin/docker ]] && echo /usr/bin/docker || command -v docker )}"
base="${BASE_IMAGE:-azr-python-base:3.11}"
redis_tag="azr-redis:offline"
postgres_tag="azr-postgres:offline"

if ((force == 0)) && "$docker" image inspect "$redis_tag" >/dev/null 2>&1 \
    && "$docker" image inspect "$postgres_tag" >/dev/null 2>&1; then
  echo "build_offline_stores: $redis_tag and $postgres_tag exist (use --force to rebuild)"
  exit 0
fi
"$docker" image inspect "$base" >/dev/null 2>&1 || DOCKER="$docker" bash "$here/build_offline_base.sh" "$base"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
[[ -x /usr/bin/redis-server && -n "$pg_bin" ]] || {
  echo "build_offline_stores: needs Debian's redis-server and postgresql packages on this host" >&2; exit 1; }
pg_home="$(dirname "$pg_bin")"
pg_share="/usr/share/postgresql/$(basename "$pg_home")"

work="$(mktemp -d /tmp/azr-stores.XXXXXX)"
trap 'rm -rf "$work"' EXIT

stage() {  # stage FILE into ROOTFS at its canonical path (directory links resolved: all of it lands under /usr)
  local rootfs="$1" source="$2" directory
  directory="$(readlink -f "$(dirname "$source")")"
  mkdir -p "$rootfs$directory"
  cp -L --preserve=mode "$source" "$rootfs$directory/$(basename "$source")"
}
stage_with_libraries() {  # stage an ELF file and every shared library it loads
  local rootfs="$1" file="$2"
  stage "$rootfs" "$file"
  ldd "$file" 2>/dev/null | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]+ \(/ {print $1}' | while read -r lib; do
    [[ -e "$rootfs$(readlink -f "$lib")" ]] || stage "$rootfs" "$lib"
  done
}
build() {  # build TAG from WORKDIR/CONTEXT's rootfs and Dockerfile
  "$docker" build --quiet --network none --build-arg "BASE_IMAGE=$base" -t "$1" "$2" >/dev/null
}

# --- redis ----------------------------------------------------------------------------------------------------------
mkdir -p "$work/redis/rootfs/data"
for binary in /usr/bin/redis-server /usr/bin/redis-cli; do stage_with_libraries "$work/redis/rootfs" "$binary"; done
cat >"$work/redis/Dockerfile" <<'DOCKERFILE'
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY rootfs/ /
RUN python3 -c "import os; open('/etc/passwd', 'a').write('redis:x:999:999:redis:/data:/bin/sh\n'); open('/etc/group', 'a').write('redis:x:999:\n'); os.chown('/data', 999, 999)"
USER 999:999
WORKDIR /data
EXPOSE 6379
ENTRYPOINT []
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no"]
DOCKERFILE
build "$redis_tag" "$work/redis"

# --- postgres -------------------------------------------------------------------------------------------------------
rootfs="$work/postgres/rootfs"
for file in "$pg_bin"/* "$pg_home"/lib/*.so; do stage_with_libraries "$rootfs" "$file"; done
mkdir -p "$rootfs$pg_share" "$rootfs/usr/share/zoneinfo" "$rootfs/var/lib/postgresql/data" "$rootfs/var/run/postgresql"
cp -a "$pg_share/." "$rootfs$pg_share/"
cp -a /usr/share/zoneinfo/. "$rootfs/usr/share/zoneinfo/"
[[ -d "$pg_home/lib" ]] && cp -a "$pg_home/lib/." "$rootfs$(readlink -f "$pg_home")/lib/"
mkdir -p "$rootfs/usr/local/bin"
cat >"$rootfs/usr/local/bin/postgres-entrypoint" <<SCRIPT
#!/bin/sh
# First start: initdb with POSTGRES_USER/POSTGRES_PASSWORD (scram for TCP), then create POSTGRES_DB. Then run.
set -eu
export PATH="$pg_bin:\$PATH"
PGDATA="\${PGDATA:-/var/lib/postgresql/data}"
user="\${POSTGRES_USER:-postgres}"
if [ ! -s "\$PGDATA/PG_VERSION" ]; then
  if [ -n "\${POSTGRES_PASSWORD_FILE:-}" ]; then  # a secret file (read by the shell itself: no coreutils here)
    IFS= read -r POSTGRES_PASSWORD < "\$POSTGRES_PASSWORD_FILE" || [ -n "\${POSTGRES_PASSWORD:-}" ]
  fi
  [ -n "\${POSTGRES_PASSWORD:-}" ] || { echo "postgres-entrypoint: POSTGRES_PASSWORD(_FILE) is required" >&2; exit 1; }
  printf '%s' "\$POSTGRES_PASSWORD" > /tmp/pwfile
  initdb -D "\$PGDATA" -U "\$user" --pwfile=/tmp/pwfile -E UTF8 --no-locale --auth-local=trust \\
    --auth-host=scram-sha-256 >/dev/null
  : > /tmp/pwfile
  echo "listen_addresses = '*'" >> "\$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "\$PGDATA/pg_hba.conf"
  # The setup server listens on a private socket only, so health checks never see it as the real server.
  pg_ctl -D "\$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/tmp" -w start >/dev/null
  db="\${POSTGRES_DB:-\$user}"
  [ "\$db" = postgres ] || createdb -h /tmp -U "\$user" "\$db"
  pg_ctl -D "\$PGDATA" -m fast -w stop >/dev/null
  echo "postgres-entrypoint: initialised \$PGDATA (user \$user, database \$db)"
fi
exec postgres -D "\$PGDATA"
SCRIPT
chmod 755 "$rootfs/usr/local/bin/postgres-entrypoint"
cat >"$work/postgres/Dockerfile" <<DOCKERFILE
ARG BASE_IMAGE
FROM \${BASE_IMAGE}
COPY rootfs/ /
RUN python3 -c "import os; open('/etc/passwd', 'a').write('postgres:x:999:999:postgres:/var/lib/postgresql:/bin/sh\n'); open('/etc/group', 'a').write('postgres:x:999:\n'); [os.chown(d, 999, 999) for d in ('/var/lib/postgresql', '/var/lib/postgresql/data', '/var/run/postgresql')]"
ENV PATH=$pg_bin:/usr/local/bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data
USER 999:999
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
CMD []
DOCKERFILE
build "$postgres_tag" "$work/postgres"
"$docker" run --rm --network none "$redis_tag" redis-server --version | grep -q '^Redis server'
"$docker" run --rm --network none --entrypoint postgres "$postgres_tag" --version | grep -q PostgreSQL
echo "build_offline_stores: built $redis_tag and $postgres_tag"
