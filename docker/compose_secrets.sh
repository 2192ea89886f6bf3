#!/usr/bin/env bash
# The secret files docker-compose.yml mounts (one per secret, named after the setting it fills: services read
# /run/secrets/azr_<field>): makes each missing one with a fresh random value, never overwrites one that exists.
# The directory is the user's alone (0700); the files are 0644 because containers run as other uids and must read
# the one file they are given (docker-compose.yml gives each service only the secrets it uses).
#
# Usage: bash docker/compose_secrets.sh [DIR]        (default: $AZR_SECRETS_DIR, else ./secrets)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-${AZR_SECRETS_DIR:-./secrets}}"
mkdir -p "$dir"
chmod 700 "$dir"
for name in azr_api_token azr_database_password azr_redis_password azr_sglang_admin_api_key; do
  if [[ ! -s "$dir/$name" ]]; then
    python3 -c 'import secrets; print(secrets.token_urlsafe(32), end="")' > "$dir/$name"
    echo "compose_secrets: made $dir/$name"
  fi
  chmod 644 "$dir/$name"
done
