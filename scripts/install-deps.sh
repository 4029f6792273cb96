#!/usr/bin/env bash
# install-deps.sh -- installs the Debian packages a target needs, only those
# missing (idempotent). Usage: scripts/install-deps.sh build|test|bench|fixtures
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

build=(gcc make pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev libgnutls28-dev)
test=("${build[@]}" check python3 python3-pytest prometheus curl openssl)
bench=("${build[@]}" wrk nginx-light python3-torch python3-numpy curl)
fixtures=(python3-torch python3-numpy)

case "${1:-build}" in
build) want=("${build[@]}") ;;
test) want=("${test[@]}") ;;
bench) want=("${bench[@]}") ;;
fixtures) want=("${fixtures[@]}") ;;
*) echo "usage: $0 build|test|bench|fixtures" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
