#!/usr/bin/env bash
# docker-build.sh -- builds docker/Dockerfile with buildah (no Docker engine
# needed) and prints the image's size and the build time.
# Usage: scripts/docker-build.sh [TAG]          (default localhost/normd:latest)
# BASE_IMAGE=... picks the base; unset, a local Debian 12 base is made once
# with debootstrap (scripts/docker-base.sh) instead of pulling one.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-localhost/normd:latest}"
base="${BASE_IMAGE:-localhost/debian:bookworm-slim}"
revision="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"

mkdir -p build
t0=$(date +%s.%N)
if [ -z "${BASE_IMAGE:-}" ]; then
  scripts/docker-base.sh "$base"
fi
t1=$(date +%s.%N)
old_id="$(buildah images --noheading --format '{{.ID}}' "$tag" 2>/dev/null || true)"
# --format docker: the OCI format has no HEALTHCHECK. No --layers: the build
# stage is not kept, so repeated builds do not pile up intermediate images.
buildah bud --isolation chroot --network host --format docker \
  --build-arg BASE_IMAGE="$base" --build-arg NORMD_REVISION="$revision" \
  -t "$tag" -f docker/Dockerfile . >build/docker-build.log 2>&1 ||
  { tail -n 30 build/docker-build.log >&2; echo "docker-build: failed (build/docker-build.log)" >&2; exit 1; }
t2=$(date +%s.%N)
# The image this tag named before, now untagged: removed, unless in use.
new_id="$(buildah images --noheading --format '{{.ID}}' "$tag")"
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  buildah rmi "$old_id" >/dev/null 2>&1 || true
fi

size="$(buildah images --format '{{.Size}}' "$tag" | head -n 1)"
base_size="$(buildah images --format '{{.Size}}' "$base" | head -n 1)"
awk -v tag="$tag" -v size="$size" -v base="$base" -v bsize="$base_size" \
  -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
    printf "docker-build: %s is %s (base %s: %s); image build %.1f s, base image step %.1f s\n",
      tag, size, base, bsize, t2 - t1, t1 - t0 }'
