#!/usr/bin/env bash
# docker-base.sh -- makes a local Debian 12 base image for machines that
# cannot pull debian:bookworm-slim: debootstrap --variant=minbase from the
# Debian mirror this machine's apt already uses, trimmed like the -slim image
# (no docs, man pages or locales), imported into buildah's storage.
# Built once: the rootfs tarball is cached in $NORMD_DOCKER_CACHE (default
# /var/cache/normd-docker, outside the repo) and the image is kept by buildah.
# Usage: scripts/docker-base.sh [IMAGE]   (default localhost/debian:bookworm-slim)
set -euo pipefail

image="${1:-localhost/debian:bookworm-slim}"
cache="${NORMD_DOCKER_CACHE:-/var/cache/normd-docker}"
tarball="$cache/bookworm-minbase.tar"

if buildah inspect --type image "$image" >/dev/null 2>&1; then
  echo "docker-base: $image already built" >&2
  exit 0
fi

# The mirror: the first URIs of a deb822 stanza whose Suites has plain
# "bookworm" (not -security), else a one-line sources.list entry.
mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         { uris = ""; ok = 0
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uris = a[2] }
             if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
           }
           if (ok && uris != "") { print uris; exit } }' "$f"
  done | head -n 1
}
mirror_uri="$(mirror)"
if [ -z "$mirror_uri" ] && [ -r /etc/apt/sources.list ]; then
  mirror_uri="$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list)"
fi
if [ -z "$mirror_uri" ]; then
  echo "docker-base: no bookworm mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list" >&2
  exit 1
fi

mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$rootfs"' EXIT
  echo "docker-base: debootstrap bookworm from $mirror_uri" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror_uri" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  # The same apt sources as this machine (incl. security and updates).
  rm -f "$rootfs/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/" 2>/dev/null ||
    echo "deb $mirror_uri bookworm main" >"$rootfs/etc/apt/sources.list"
  # Trim like debian:bookworm-slim, and keep later installs trimmed.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  # apt settings of the official image: no package caches, no translations.
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
  find "$rootfs/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/usr/share/lintian/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/*
  tar -C "$rootfs" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi

echo "docker-base: importing $tarball as $image" >&2
ctr="$(buildah from scratch)"
mnt="$(buildah mount "$ctr")"
tar -C "$mnt" --numeric-owner -xf "$tarball"
buildah umount "$ctr" >/dev/null
buildah config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
buildah commit -q --rm "$ctr" "$image" >/dev/null
echo "docker-base: $image ready" >&2
