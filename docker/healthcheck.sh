#!/bin/bash
# normd-healthcheck -- the image's HEALTHCHECK: GET /healthz over bash's
# /dev/tcp, exit 0 on "HTTP/1.1 200", 1 otherwise. No curl in the image.
# Port: $NORMD_PORT, else 8080 (the image's config file); host 127.0.0.1.
port="${NORMD_PORT:-8080}"
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
read -r -t 2 _ status _ <&3 || exit 1
[ "$status" = 200 ]
