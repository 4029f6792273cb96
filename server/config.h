/* config.h -- the daemon's settings: one table of keys, each with a default,
 * bounds and a help line. Precedence: defaults < JSON file (--config) <
 * environment (NORMD_<KEY>, upper case) < command-line flags (--<key> with
 * '_' written as '-', e.g. --max-body-bytes). Every value is validated; an
 * invalid one stops startup with one clear line. */
#ifndef NORMD_CONFIG_H
#define NORMD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  char host[256];            /* listen address, "0.0.0.0" / "::" / "127.0.0.1" */
  int64_t port;              /* 0 = ephemeral (the bound port is logged) */
  int64_t threads;           /* worker threads (libuv pool); 0 = number of CPUs */
  int64_t http_threads;      /* libmicrohttpd polling threads */
  int64_t max_body_bytes;    /* larger bodies get 413 */
  int64_t max_elements;      /* largest tensor accepted, in elements */
  int64_t max_inflight;      /* queued + running jobs before 503 */
  int64_t inline_body_bytes; /* bodies up to this are computed on the HTTP
                                thread; 0 = all in the pool */
  int64_t max_connections;   /* concurrent connections */
  int64_t per_ip_connections;/* concurrent connections per client IP; 0 = off */
  int64_t connection_timeout_s; /* idle connection timeout */
  int64_t request_timeout_s; /* a request's headers + body must arrive within
                                this, from its first byte; 0 = no limit */
  int64_t drain_timeout_s;   /* how long SIGTERM waits for in-flight work */
  int64_t retry_after_s;     /* Retry-After on 503 */
  int64_t max_json_depth;    /* deepest JSON nesting accepted */
  int64_t max_explain_elements; /* largest input for "steps" (explain) */
  int compression;           /* 1: compress answers on Accept-Encoding */
  char cors_origins[1024];   /* "*" or a comma-separated list; "" = no CORS */
  char log_level[16];        /* "error", "warn", "info" (access log), "debug" */
  char log_format[8];        /* "text" or "json" (one object per line) */
  char web_root[1024];       /* directory served at GET / */
  char openapi_path[1024];   /* file served at GET /openapi.yaml */
  char tls_cert[1024];       /* PEM files: HTTPS when both are set */
  char tls_key[1024];
  char api_keys[4096];       /* comma-separated; secret: never printed */
  char api_keys_file[1024];
  char api_key_scope[16];    /* "compute" or "all" */
} config_t;

/* Fills *cfg with the defaults. */
void config_defaults(config_t *cfg);

/* Applies the JSON object in `path` (keys as in config_t; unknown keys are
 * errors; a key documented with a "_doc" suffix, e.g. "port_doc", is
 * ignored so the file can carry its own documentation). Returns 0, or -1
 * with a one-line message in err. */
int config_load_file(config_t *cfg, const char *path, char *err, size_t errlen);

/* Applies NORMD_<KEY> variables from envp (NULL-terminated "K=V" strings).
 * Returns 0 or -1 with err. */
int config_load_env(config_t *cfg, char *const *envp, char *err, size_t errlen);

/* Result of config_from_args. */
typedef enum {
  CONFIG_RUN = 0,   /* start the daemon */
  CONFIG_EXIT_OK,   /* --help / --version printed; exit 0 */
  CONFIG_EXIT_ERR,  /* bad flag or value; message in err; exit 2 */
  CONFIG_PRINT,     /* --print-config: cfg is complete and valid; the caller
                       makes its startup checks, then config_print()s it */
} config_action_t;

/* Full precedence chain for main(): defaults, then the file named by
 * --config (or NORMD_CONFIG), then the environment, then the flags.
 * --help and --version print to `out` and return CONFIG_EXIT_OK;
 * --print-config returns CONFIG_PRINT with cfg filled in, printing
 * nothing (main checks it as startup would, then prints). Messages in err (here and
 * above) are one line without the program name: main prints
 * "normd: <err>\n" to stderr. */
config_action_t config_from_args(config_t *cfg, int argc, char **argv,
                                 char *const *envp, void *out /* FILE* */,
                                 const char *version, char *err,
                                 size_t errlen);

/* Sets one key from text (the common path of file, env and flags).
 * Returns 0 or -1 with err ("max_inflight: must be between 1 and 100000,
 * got 0"). */
int config_set(config_t *cfg, const char *key, const char *value, char *err,
               size_t errlen);

/* Writes the effective config as a JSON object (one key per line). */
void config_print(const config_t *cfg, void *out /* FILE* */);

#endif
