#!/usr/bin/env bash
# Redis and PostgreSQL for the test suite, from Debian's packages, on a machine that may have neither (`make services`;
# .ci/run calls it first). It installs what is missing, gives PostgreSQL what the tests expect (trust for local
# connections on 127.0.0.1, ::1 and the socket; a `test` database owned by `postgres`), starts both, waits until
# they answer and says what it did. Where both already run as the tests need them it changes nothing.
# Needs root (apt-get, the cluster's files). Redis runs without persistence: it holds only test data.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PATH="$PATH:/usr/sbin:/sbin"
say() { echo "services: $*"; }

if [[ $EUID -ne 0 ]]; then
  echo "services: run as root (it installs packages and edits PostgreSQL's pg_hba.conf); or start Redis on" \
       "127.0.0.1:6379 and PostgreSQL with a trusted 'test' database on 127.0.0.1:5432 yourself" >&2
  exit 1
fi

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Redis
if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  say "redis already answers on 127.0.0.1:6379"
else
  say "starting redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/azr-tests.log
fi

# PostgreSQL: the first cluster Debian created (the package makes `main`); one is created if none exists.
version="$(ls /usr/lib/postgresql | sort -V | tail -n1)"
if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
  say "creating PostgreSQL cluster $version/main"
  pg_createcluster "$version" main >/dev/null
fi
read -r version cluster _ < <(pg_lsclusters -h | head -n1)
hba="/etc/postgresql/$version/$cluster/pg_hba.conf"
marker="# azr tests: trust local connections"
hba_changed=0
if ! grep -qF "$marker" "$hba"; then
  say "trusting local connections in $hba (a test machine's database; never do this where others log in)"
  { echo "$marker"
    echo "local all all trust"
    echo "host all all 127.0.0.1/32 trust"
    echo "host all all ::1/128 trust"
    cat "$hba"; } >"$hba.azr" && mv "$hba.azr" "$hba"
  chown postgres:postgres "$hba"
  hba_changed=1
fi
status="$(pg_lsclusters -h | awk -v c="$cluster" '$2 == c {print $4}' | head -n1)"
if [[ "$status" != online* ]]; then
  say "starting PostgreSQL $version/$cluster"
  pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start
elif ((hba_changed)); then
  say "reloading PostgreSQL $version/$cluster"
  pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" reload
fi

for _ in $(seq 1 60); do
  redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 1
done
redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 || { echo "services: redis did not answer in 60 s" >&2; exit 1; }
pg_isready -q -h 127.0.0.1 -p 5432 || { echo "services: PostgreSQL did not answer in 60 s" >&2; exit 1; }
if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1; then
  say "creating database 'test'"
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test' >/dev/null
fi
psql -h 127.0.0.1 -U postgres -d test -tAc 'SELECT 1' >/dev/null
say "ready: redis 127.0.0.1:6379, postgresql://postgres@127.0.0.1:5432/test"
