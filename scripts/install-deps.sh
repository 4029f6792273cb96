#!/usr/bin/env bash
# install-deps.sh -- installs the Debian packages a target needs, only those
# missing (idempotent).
# Usage: scripts/install-deps.sh build|test|browser|bench|fixtures|asan|
#        valgrind|fuzz|stress|docker|cluster|prometheus
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

build=(gcc make pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev libgnutls28-dev zlib1g-dev)
# tests/contract: PyYAML and jsonschema read and apply api/openapi.yaml, the
# redocly linter comes from npm (node/npm below), libcurl builds examples/client.c;
# the Python client's install test builds it in a venv with Debian's setuptools;
# python3-torch (175 MB of packages, ~40 s to install) runs the 307 black-box
# tests that compare answers with torch and torch.autograd live (skipped without).
test=("${build[@]}" check python3 python3-pytest python3-numpy prometheus curl openssl
  python3-yaml python3-jsonschema libcurl4-openssl-dev python3-setuptools python3-venv
  python3-torch)
bench=("${build[@]}" wrk nginx-light python3-torch python3-numpy curl
       python3-fastapi python3-uvicorn python3-uvloop python3-httptools)
fixtures=(python3-torch python3-numpy)
# make browser-test (part of make test): Debian's chromium, driven from
# node by playwright-core (npm); a node/npm from elsewhere will do. A CJK
# font makes the Chinese page's screenshots readable: fonts-wqy-microhei
# (1.6 MB download, 5 MB installed, in Debian 12) rather than
# fonts-noto-cjk (57 MB, 91 MB installed).
browser_extra=(chromium fonts-wqy-microhei)
browser=("${build[@]}" "${browser_extra[@]}")
asan=("${test[@]}")                 # gcc's libasan/libubsan come with gcc
valgrind=("${test[@]}" valgrind)
fuzz=("${build[@]}" clang libclang-rt-14-dev) # libFuzzer + sanitizer runtimes
stress=("${build[@]}" python3)
# make docker-test: buildah builds and runs the image, debootstrap makes its
# base, ss (iproute2) finds the daemon's pid, kubectl and node/npm check
# docker/k8s, python3-yaml reads docker/compose.yaml.
docker=("${build[@]}" buildah debootstrap iproute2 python3 python3-yaml)
# make cluster-test: three replicas behind Debian's nginx.
cluster=("${build[@]}" nginx-light python3)
# make prometheus-test: Debian's prometheus (prometheus and promtool) scrapes
# live replicas and runs docker/prometheus/alerts.yml. Grafana is no Debian
# package: only its dashboard JSON is checked.
prometheus=("${build[@]}" prometheus python3)

case "${1:-build}" in
build) want=("${build[@]}") ;;
test|browser)
  if [ "$1" = test ]; then want=("${test[@]}" "${browser_extra[@]}"); else want=("${browser[@]}"); fi
  command -v npm >/dev/null && command -v node >/dev/null || want+=(nodejs npm)
  ;;
bench) want=("${bench[@]}") ;;
fixtures) want=("${fixtures[@]}") ;;
asan) want=("${asan[@]}") ;;
valgrind) want=("${valgrind[@]}") ;;
fuzz) want=("${fuzz[@]}") ;;
stress) want=("${stress[@]}") ;;
docker)
  want=("${docker[@]}")
  # A kubectl or node from elsewhere will do (Debian's packages would clash
  # with it over /usr/bin/kubectl).
  command -v kubectl >/dev/null || want+=(kubernetes-client)
  command -v npm >/dev/null && command -v node >/dev/null || want+=(nodejs npm)
  ;;
cluster) want=("${cluster[@]}") ;;
prometheus) want=("${prometheus[@]}") ;;
*)
  echo "usage: $0 build|test|browser|bench|fixtures|asan|valgrind|fuzz|stress|docker|cluster|prometheus" >&2
  exit 2
  ;;
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
