/* http.h -- the HTTP server (libmicrohttpd, poll, internal threads) that
 * routes requests, answers small GET routes itself and hands compute
 * requests to the worker pool. */
#ifndef NORMD_HTTP_H
#define NORMD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pool.h"

typedef struct server server_t;

/* The checks http_start makes before it listens (the host resolves, API
 * keys valid, TLS files set together and readable), without listening:
 * for --print-config. 0, or -1 with a one-line reason in err. */
int http_check_config(const config_t *cfg, char *err, size_t errlen);
/* Starts listening per cfg (which must outlive the server). NULL with a
 * one-line reason in err on failure. */
server_t *http_start(const config_t *cfg, pool_t *pool, char *err,
                     size_t errlen);
/* Whether it serves HTTPS / requires API keys (for the startup line). */
int http_tls(const server_t *srv);
int http_auth(const server_t *srv);
/* The bound port (useful with port 0). */
uint16_t http_port(const server_t *srv);
/* Readiness turns 503, the listening socket closes; compute requests
 * whose headers are in continue (their bodies may still be arriving). */
void http_begin_drain(server_t *srv);
/* Waits until no compute request is open, the pool is idle and no
 * request is still arriving on an open connection (its headers not yet
 * in: it is then answered 503 draining): 0, or, when timeout_s passed
 * first, how many requests are still open (> 0). */
long http_wait_idle(server_t *srv, double timeout_s);
/* Stops MHD and frees the server. Only after http_wait_idle returned 0
 * (MHD cannot stop with suspended connections). */
void http_stop(server_t *srv);

#endif
