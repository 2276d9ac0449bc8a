#!/usr/bin/env bash
# Installs what the Python lock cannot: Debian packages (scripts/system-packages.txt) and npm
# packages pinned by a package-lock.json under tests/npm/. Idempotent; quiet when all is present.
# Needs root (or sudo) for apt-get; skips what it cannot do with a clear note instead of failing
# a user's `uv sync`.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/system-packages.txt | grep -v '^$' || true)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup-system: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -f tests/npm/package-lock.json ] && command -v npm >/dev/null 2>&1; then
  if [ ! -d tests/npm/node_modules ] || [ tests/npm/package-lock.json -nt tests/npm/node_modules ]; then
    (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
