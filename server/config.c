/* config.c -- the daemon's settings. One table (`keys` below) gives each
 * key's type, bounds, default and help line; defaults, the JSON file, the
 * NORMD_* environment, the --flags, --help and --print-config all walk it.
 * Error messages are one line without the program name (main prints
 * "normd: <err>"); a failed source leaves the caller's config untouched. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { KEY_INT, KEY_STR, KEY_BOOL } key_type_t;

/* Extra validation for a string value: 0, or -1 with the reason in why. */
typedef int (*str_check_fn)(const char *value, char *why, size_t whylen);

typedef struct {
  const char *name;
  key_type_t type;
  size_t off;
  size_t size;      /* sizeof the config_t member (KEY_STR: with the NUL) */
  int64_t min, max; /* KEY_INT bounds, inclusive */
  int64_t idef;     /* KEY_INT default; KEY_BOOL's, 0 or 1 */
  const char *sdef; /* KEY_STR default */
  str_check_fn check;
  const char *help;
  int secret; /* never printed (--print-config shows whether it is set) */
} key_def_t;

#define MEMBER_SIZE(f) sizeof(((config_t *)0)->f)
#define INT_KEY(f, lo, hi, def, help_)                                         \
  {                                                                            \
    .name = #f, .type = KEY_INT, .off = offsetof(config_t, f),                 \
    .size = MEMBER_SIZE(f), .min = lo, .max = hi, .idef = def, .help = help_   \
  }
#define STR_KEY(f, def, check_, help_)                                         \
  {                                                                            \
    .name = #f, .type = KEY_STR, .off = offsetof(config_t, f),                 \
    .size = MEMBER_SIZE(f), .sdef = def, .check = check_, .help = help_        \
  }

/* A boolean (an int member, 0 or 1): true / false in the JSON file, and
 * true, false, 1 or 0 in the environment and on the command line. */
#define BOOL_KEY(f, def, help_)                                                \
  {                                                                            \
    .name = #f, .type = KEY_BOOL, .off = offsetof(config_t, f),                \
    .size = MEMBER_SIZE(f), .min = 0, .max = 1, .idef = def, .help = help_     \
  }

#define SECRET_KEY(f, help_)                                                   \
  {                                                                            \
    .name = #f, .type = KEY_STR, .off = offsetof(config_t, f),                 \
    .size = MEMBER_SIZE(f), .sdef = "", .check = NULL, .help = help_,          \
    .secret = 1                                                                \
  }

static int check_nonempty(const char *v, char *why, size_t n);
static int check_log_level(const char *v, char *why, size_t n);
static int check_log_format(const char *v, char *why, size_t n);
static int check_cors(const char *v, char *why, size_t n);
static int check_scope(const char *v, char *why, size_t n);

static const key_def_t keys[] = {
    STR_KEY(host, "0.0.0.0", check_nonempty,
            "listen address, e.g. 0.0.0.0, :: or 127.0.0.1"),
    INT_KEY(port, 0, 65535, 8080,
            "TCP port; 0 picks an ephemeral port (the bound port is logged)"),
    INT_KEY(threads, 0, 256, 0,
            "worker threads computing norms (libuv pool); 0 = number of CPUs"),
    INT_KEY(http_threads, 1, 64, 2,
            "libmicrohttpd polling threads that accept and read requests"),
    INT_KEY(max_body_bytes, 1024, INT64_C(4294967296), 64 * 1024 * 1024,
            "largest request body in bytes; larger bodies get 413"),
    INT_KEY(max_elements, 1, INT64_C(1) << 31, 16777216,
            "largest tensor accepted, in elements"),
    INT_KEY(max_inflight, 1, 100000, 64,
            "jobs queued or running before new requests get 503 + Retry-After"),
    INT_KEY(inline_body_bytes, 0, INT64_C(4294967296), 64 * 1024,
            "compute requests with a body up to this many bytes on the HTTP "
            "thread that read them, not in the pool; 0 = all in the pool"),
    INT_KEY(max_connections, 1, 100000, 1024, "concurrent connections"),
    INT_KEY(per_ip_connections, 0, 100000, 0,
            "concurrent connections per client IP; 0 = unlimited"),
    INT_KEY(connection_timeout_s, 1, 3600, 30,
            "seconds an idle connection is kept open"),
    INT_KEY(request_timeout_s, 0, 3600, 30,
            "seconds a request's headers and body may take to arrive, from "
            "its first byte; slower clients are disconnected; 0 = no limit"),
    INT_KEY(drain_timeout_s, 0, 3600, 30,
            "seconds SIGTERM/SIGINT waits for in-flight requests to finish"),
    INT_KEY(retry_after_s, 1, 3600, 1,
            "Retry-After seconds sent with 503 responses"),
    INT_KEY(max_json_depth, 2, 1000, 32,
            "deepest JSON nesting accepted in a request body"),
    INT_KEY(max_explain_elements, 1, INT64_C(1) << 24, 65536,
            "largest input (elements) whose intermediate steps may be returned"),
    BOOL_KEY(compression, 1,
             "compress answers of 1 KiB or more in gzip or deflate when "
             "Accept-Encoding asks; false when a proxy in front compresses"),
    STR_KEY(cors_origins, "*", check_cors,
            "\"*\", or comma-separated origins (https://host[:port]) allowed "
            "by CORS; \"\" disables CORS"),
    STR_KEY(log_level, "info", check_log_level,
            "error, warn, info (adds the access log) or debug"),
    STR_KEY(log_format, "text", check_log_format,
            "text (`<time> <level> <message>` lines) or json (one object per "
            "line: ts, level, msg; access lines add method, path, status, "
            "bytes_in, bytes_out, duration_ms, request_id, remote)"),
    STR_KEY(web_root, "web", check_nonempty,
            "directory of the visualizer served at GET /"),
    STR_KEY(openapi_path, "api/openapi.yaml", check_nonempty,
            "file served at GET /openapi.yaml"),
    STR_KEY(tls_cert, "", NULL,
            "PEM certificate file: serve HTTPS (with tls_key); \"\" = plain HTTP"),
    STR_KEY(tls_key, "", NULL, "PEM private key file for tls_cert"),
    SECRET_KEY(api_keys,
               "comma-separated API keys (16+ characters each) required as "
               "Authorization: Bearer <key>; \"\" = no keys (open)"),
    STR_KEY(api_keys_file, "", NULL,
            "file of API keys, one per line, plain or sha256:<hex>; '#' comments"),
    STR_KEY(api_key_scope, "compute", check_scope,
            "where keys are required: compute (the /v1 and /v2 compute "
            "routes) or all (every route but health and readiness)"),
};
enum { NKEYS = sizeof keys / sizeof keys[0] };

#define ENV_PREFIX "NORMD_"
#define ENV_CONFIG "NORMD_CONFIG"

/* ---- helpers ------------------------------------------------------------ */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* A user value made safe to echo inside a one-line message: control bytes
 * become '?', and long values are cut with "...". */
static const char *shown(const char *s, char *buf, size_t buflen) {
  size_t i = 0, max = buflen - 4;
  for (; s[i] && i < max; i++)
    buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
  if (s[i]) {
    memcpy(buf + i, "...", 3);
    i += 3;
  }
  buf[i] = '\0';
  return buf;
}

static const key_def_t *find_key(const char *name) {
  for (int i = 0; i < NKEYS; i++)
    if (strcmp(keys[i].name, name) == 0)
      return &keys[i];
  return NULL;
}

/* Matches a flag name (key with '_' written as '-') of length len. */
static const key_def_t *find_flag(const char *name, size_t len) {
  for (int i = 0; i < NKEYS; i++) {
    const char *k = keys[i].name;
    size_t j = 0;
    for (; j < len && k[j]; j++)
      if (name[j] != (k[j] == '_' ? '-' : k[j]))
        break;
    if (j == len && k[j] == '\0')
      return &keys[i];
  }
  return NULL;
}

static void env_name(const key_def_t *k, char *buf, size_t buflen) {
  size_t n = strlen(ENV_PREFIX);
  memcpy(buf, ENV_PREFIX, n);
  for (const char *p = k->name; *p && n + 1 < buflen; p++)
    buf[n++] = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
  buf[n] = '\0';
}

/* The value of the first "name=value" entry in envp, or NULL. */
static const char *env_lookup(char *const *envp, const char *name) {
  size_t n = strlen(name);
  for (; envp && *envp; envp++)
    if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
      return *envp + n + 1;
  return NULL;
}

static int64_t *int_field(config_t *cfg, const key_def_t *k) {
  return (int64_t *)(void *)((char *)cfg + k->off);
}
static const int64_t *int_field_c(const config_t *cfg, const key_def_t *k) {
  return (const int64_t *)(const void *)((const char *)cfg + k->off);
}
static int *bool_field(config_t *cfg, const key_def_t *k) {
  return (int *)(void *)((char *)cfg + k->off);
}
static const int *bool_field_c(const config_t *cfg, const key_def_t *k) {
  return (const int *)(const void *)((const char *)cfg + k->off);
}
static char *str_field(config_t *cfg, const key_def_t *k) {
  return (char *)cfg + k->off;
}
static const char *str_field_c(const config_t *cfg, const key_def_t *k) {
  return (const char *)cfg + k->off;
}

/* ---- string checks ------------------------------------------------------ */

static int check_nonempty(const char *v, char *why, size_t n) {
  return *v ? 0 : fail(why, n, "must not be empty");
}

static int check_log_level(const char *v, char *why, size_t n) {
  static const char *const levels[] = {"error", "warn", "info", "debug"};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
    if (strcmp(v, levels[i]) == 0)
      return 0;
  char b[64];
  return fail(why, n, "must be one of error, warn, info, debug, got \"%s\"",
              shown(v, b, sizeof b));
}

static int check_log_format(const char *v, char *why, size_t n) {
  char b[64];
  if (strcmp(v, "text") == 0 || strcmp(v, "json") == 0) return 0;
  return fail(why, n, "must be text or json, got \"%s\"", shown(v, b, sizeof b));
}

static int check_scope(const char *v, char *why, size_t n) {
  char b[64];
  if (strcmp(v, "compute") == 0 || strcmp(v, "all") == 0) return 0;
  return fail(why, n, "must be compute or all, got \"%s\"", shown(v, b, sizeof b));
}

/* "" (CORS off), "*" alone, or origins "http[s]://host[:port]" joined by ','
 * with no spaces and no path. */
static int check_cors(const char *v, char *why, size_t n) {
  if (*v == '\0' || strcmp(v, "*") == 0)
    return 0;
  const char *p = v;
  for (;;) {
    size_t len = strcspn(p, ",");
    char item[1024], b[96];
    if (len >= sizeof item)
      len = sizeof item - 1;
    memcpy(item, p, len);
    item[len] = '\0';
    if (len == 0)
      return fail(why, n, "empty origin in \"%s\"", shown(v, b, sizeof b));
    if (strcmp(item, "*") == 0)
      return fail(why, n, "\"*\" must stand alone, not in a list");
    const char *rest = strncmp(item, "http://", 7) == 0    ? item + 7
                       : strncmp(item, "https://", 8) == 0 ? item + 8
                                                           : NULL;
    if (!rest || !*rest || strpbrk(rest, "/ \t?#"))
      return fail(why, n,
                  "origin \"%s\" must be http://host[:port] or "
                  "https://host[:port] (no path or spaces)",
                  shown(item, b, sizeof b));
    p += strcspn(p, ",");
    if (*p == '\0')
      return 0;
    p++;
  }
}

/* ---- setters: every source ends here ------------------------------------ */

static int set_int(config_t *cfg, const key_def_t *k, int64_t v,
                   const char *label, char *err, size_t errlen) {
  if (v < k->min || v > k->max)
    return fail(err, errlen,
                "%s: must be between %" PRId64 " and %" PRId64 ", got %" PRId64,
                label, k->min, k->max, v);
  *int_field(cfg, k) = v;
  return 0;
}

static int set_str(config_t *cfg, const key_def_t *k, const char *v,
                   const char *label, char *err, size_t errlen) {
  size_t len = strlen(v);
  if (len >= k->size)
    return fail(err, errlen, "%s: too long (%zu bytes, at most %zu)", label,
                len, k->size - 1);
  /* as in the JSON file (jansson checks it), so --print-config stays JSON */
  json_t *utf8 = json_string(v);
  if (utf8 == NULL) return fail(err, errlen, "%s: not valid UTF-8", label);
  json_decref(utf8);
  char why[256];
  if (k->check && k->check(v, why, sizeof why))
    return fail(err, errlen, "%s: %s", label, why);
  char *dst = str_field(cfg, k);
  memset(dst, 0, k->size);
  memcpy(dst, v, len);
  return 0;
}

/* Strict base-10 integer: optional '-', digits, nothing else; a boolean
 * is true, false, 1 or 0. */
static int set_text(config_t *cfg, const key_def_t *k, const char *text,
                    const char *label, char *err, size_t errlen) {
  if (k->type == KEY_STR)
    return set_str(cfg, k, text, label, err, errlen);
  char b[64];
  if (k->type == KEY_BOOL) {
    int yes = strcmp(text, "true") == 0 || strcmp(text, "1") == 0;
    if (!yes && strcmp(text, "false") != 0 && strcmp(text, "0") != 0)
      return fail(err, errlen, "%s: must be true or false, got \"%s\"", label,
                  shown(text, b, sizeof b));
    *bool_field(cfg, k) = yes;
    return 0;
  }
  const char *digits = text[0] == '-' ? text + 1 : text;
  if (*digits < '0' || *digits > '9')
    return fail(err, errlen, "%s: not an integer: \"%s\"", label,
                shown(text, b, sizeof b));
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*end != '\0')
    return fail(err, errlen, "%s: not an integer: \"%s\"", label,
                shown(text, b, sizeof b));
  if (errno == ERANGE)
    return fail(err, errlen,
                "%s: must be between %" PRId64 " and %" PRId64 ", got %s",
                label, k->min, k->max, shown(text, b, sizeof b));
  return set_int(cfg, k, (int64_t)v, label, err, errlen);
}

/* ---- public: defaults, set, file, env ----------------------------------- */

void config_defaults(config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  for (int i = 0; i < NKEYS; i++) {
    const key_def_t *k = &keys[i];
    if (k->type == KEY_INT)
      *int_field(cfg, k) = k->idef;
    else if (k->type == KEY_BOOL)
      *bool_field(cfg, k) = (int)k->idef;
    else
      memcpy(str_field(cfg, k), k->sdef, strlen(k->sdef) + 1);
  }
}

int config_set(config_t *cfg, const char *key, const char *value, char *err,
               size_t errlen) {
  const key_def_t *k = find_key(key);
  char b[64];
  if (!k)
    return fail(err, errlen, "unknown key \"%s\"", shown(key, b, sizeof b));
  return set_text(cfg, k, value, k->name, err, errlen);
}

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a real number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  default:
    return "null";
  }
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int config_load_file(config_t *cfg, const char *path, char *err,
                     size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(err, errlen, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return fail(err, errlen, "%s: %s", path, strerror(EISDIR));
  }
  json_error_t je;
  json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
  fclose(f);
  if (!root) {
    char b[sizeof je.text + 4]; /* jansson quotes the file's bytes, '\n' too */
    return fail(err, errlen, "%s:%d:%d: invalid JSON: %s", path, je.line,
                je.column, shown(je.text, b, sizeof b));
  }

  int rc = -1;
  config_t tmp = *cfg;
  const char *name;
  json_t *val;
  char label[1024], b[64];
  if (!json_is_object(root)) {
    fail(err, errlen, "%s: expected a JSON object, got %s", path,
         json_kind(root));
    goto out;
  }
  json_object_foreach(root, name, val) {
    if (ends_with(name, "_doc"))
      continue;
    const key_def_t *k = find_key(name);
    if (!k) {
      fail(err, errlen, "%s: unknown key \"%s\"", path,
           shown(name, b, sizeof b));
      goto out;
    }
    snprintf(label, sizeof label, "%s: %s", path, k->name);
    if (k->type == KEY_INT) {
      if (!json_is_integer(val)) {
        fail(err, errlen, "%s: expected an integer, got %s", label,
             json_kind(val));
        goto out;
      }
      if (set_int(&tmp, k, json_integer_value(val), label, err, errlen))
        goto out;
    } else if (k->type == KEY_BOOL) {
      if (!json_is_boolean(val)) {
        fail(err, errlen, "%s: expected true or false, got %s", label,
             json_kind(val));
        goto out;
      }
      *bool_field(&tmp, k) = json_is_true(val);
    } else {
      if (!json_is_string(val)) {
        fail(err, errlen, "%s: expected a string, got %s", label,
             json_kind(val));
        goto out;
      }
      if (set_str(&tmp, k, json_string_value(val), label, err, errlen))
        goto out;
    }
  }
  *cfg = tmp;
  rc = 0;
out:
  json_decref(root);
  return rc;
}

int config_load_env(config_t *cfg, char *const *envp, char *err,
                    size_t errlen) {
  config_t tmp = *cfg;
  for (int i = 0; i < NKEYS; i++) {
    char var[64];
    env_name(&keys[i], var, sizeof var);
    const char *v = env_lookup(envp, var);
    if (v && set_text(&tmp, &keys[i], v, var, err, errlen))
      return -1;
  }
  *cfg = tmp;
  return 0;
}

/* ---- output ------------------------------------------------------------- */

static void print_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

void config_print(const config_t *cfg, void *out) {
  FILE *f = out ? out : stdout;
  fputs("{\n", f);
  for (int i = 0; i < NKEYS; i++) {
    const key_def_t *k = &keys[i];
    fprintf(f, "  \"%s\": ", k->name);
    if (k->type == KEY_INT)
      fprintf(f, "%" PRId64, *int_field_c(cfg, k));
    else if (k->type == KEY_BOOL)
      fputs(*bool_field_c(cfg, k) ? "true" : "false", f);
    else if (k->secret && *str_field_c(cfg, k))
      print_json_string(f, "(set, hidden)");
    else
      print_json_string(f, str_field_c(cfg, k));
    fputs(i + 1 < NKEYS ? ",\n" : "\n", f);
  }
  fputs("}\n", f);
}

static void print_usage(FILE *f) {
  fputs("usage: normd [--config FILE] [--KEY VALUE | --KEY=VALUE]...\n"
        "Settings apply in order: defaults < config file < environment "
        "(NORMD_<KEY>) < flags.\n\n",
        f);
  fprintf(f, "  %-26s %s\n", "--config FILE",
          "JSON config file (env " ENV_CONFIG ")");
  fprintf(f, "  %-26s %s\n", "--print-config",
          "check the config as startup does, print it as JSON, exit");
  fprintf(f, "  %-26s %s\n", "--version", "print the version and exit");
  fprintf(f, "  %-26s %s\n\n", "-h, --help", "print this help and exit");
  for (int i = 0; i < NKEYS; i++) {
    const key_def_t *k = &keys[i];
    char flag[64], var[64];
    size_t n = (size_t)snprintf(flag, sizeof flag, "%s--",
                                strcmp(k->name, "port") == 0 ? "-p, " : "");
    for (const char *p = k->name; *p && n + 1 < sizeof flag; p++)
      flag[n++] = *p == '_' ? '-' : *p;
    snprintf(flag + n, sizeof flag - n, " %s",
             k->type == KEY_INT    ? "N"
             : k->type == KEY_BOOL ? "true|false"
                                   : "TEXT");
    env_name(k, var, sizeof var);
    fprintf(f, "  %-26s ", flag);
    if (k->type == KEY_INT)
      fprintf(f, "default %" PRId64 ", %" PRId64 "..%" PRId64, k->idef, k->min,
              k->max);
    else if (k->type == KEY_BOOL)
      fprintf(f, "default %s", k->idef ? "true" : "false");
    else
      fprintf(f, "default \"%s\"", k->sdef);
    fprintf(f, ", env %s\n  %-26s %s\n", var, "", k->help);
  }
}

/* ---- command line ------------------------------------------------------- */

typedef enum {
  OPT_KEY,
  OPT_CONFIG,
  OPT_HELP,
  OPT_VERSION,
  OPT_PRINT
} opt_kind_t;

typedef struct {
  opt_kind_t kind;
  const key_def_t *key; /* OPT_KEY */
  const char *value;    /* OPT_KEY, OPT_CONFIG */
} opt_t;

/* Reads the option at argv[*i] and its value (inline after '=' or the next
 * argument), advancing *i past both. Returns 0, or -1 with err. */
static int next_opt(int argc, char **argv, int *i, opt_t *o, char *err,
                    size_t errlen) {
  const char *arg = argv[(*i)++];
  char b[64];
  memset(o, 0, sizeof *o);
  if (arg[0] != '-' || arg[1] == '\0')
    return fail(err, errlen, "unexpected argument \"%s\"",
                shown(arg, b, sizeof b));

  const char *inline_val = NULL;
  if (arg[1] != '-') { /* short options: -h, -p N, -pN */
    if (strcmp(arg, "-h") == 0) {
      o->kind = OPT_HELP;
      return 0;
    }
    if (arg[1] != 'p')
      return fail(err, errlen, "unknown option %s", shown(arg, b, sizeof b));
    o->kind = OPT_KEY;
    o->key = find_key("port");
    if (arg[2])
      inline_val = arg + 2;
  } else {
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    int takes_value = 1;
#define IS(s) (len == strlen(s) && strncmp(name, s, len) == 0)
    if (IS("help"))
      o->kind = OPT_HELP, takes_value = 0;
    else if (IS("version"))
      o->kind = OPT_VERSION, takes_value = 0;
    else if (IS("print-config"))
      o->kind = OPT_PRINT, takes_value = 0;
    else if (IS("config"))
      o->kind = OPT_CONFIG;
    else if ((o->key = find_flag(name, len)) != NULL)
      o->kind = OPT_KEY;
    else
      return fail(err, errlen, "unknown option --%.*s",
                  (int)(len < 48 ? len : 48), name);
#undef IS
    if (!takes_value) {
      if (eq)
        return fail(err, errlen, "option --%.*s takes no value", (int)len,
                    name);
      return 0;
    }
    if (eq)
      inline_val = eq + 1;
  }
  if (inline_val)
    o->value = inline_val;
  else if (*i < argc)
    o->value = argv[(*i)++];
  else
    return fail(err, errlen, "option %s needs a value",
                shown(arg, b, sizeof b));
  return 0;
}

config_action_t config_from_args(config_t *cfg, int argc, char **argv,
                                 char *const *envp, void *out,
                                 const char *version, char *err,
                                 size_t errlen) {
  FILE *f = out ? out : stdout;
  config_t tmp;
  config_defaults(&tmp);
  const char *file = env_lookup(envp, ENV_CONFIG);
  if (file && !*file)
    file = NULL; /* NORMD_CONFIG= means no file */
  int print = 0;
  opt_t o;

  /* Pass 1: check every option, find --config; --help/--version win. */
  for (int i = 1; i < argc;) {
    if (next_opt(argc, argv, &i, &o, err, errlen))
      return CONFIG_EXIT_ERR;
    switch (o.kind) {
    case OPT_HELP:
      print_usage(f);
      return CONFIG_EXIT_OK;
    case OPT_VERSION:
      fprintf(f, "normd %s\n", version ? version : "unknown");
      return CONFIG_EXIT_OK;
    case OPT_PRINT:
      print = 1;
      break;
    case OPT_CONFIG:
      if (!*o.value) {
        fail(err, errlen, "option --config needs a file name");
        return CONFIG_EXIT_ERR;
      }
      file = o.value;
      break;
    case OPT_KEY:
      break;
    }
  }
  if (file && config_load_file(&tmp, file, err, errlen))
    return CONFIG_EXIT_ERR;
  if (config_load_env(&tmp, envp, err, errlen))
    return CONFIG_EXIT_ERR;
  /* Pass 2: the flags, in order (the last of a repeated flag wins). */
  for (int i = 1; i < argc;) {
    if (next_opt(argc, argv, &i, &o, err, errlen))
      return CONFIG_EXIT_ERR;
    if (o.kind == OPT_KEY &&
        set_text(&tmp, o.key, o.value, o.key->name, err, errlen))
      return CONFIG_EXIT_ERR;
  }
  *cfg = tmp;
  return print ? CONFIG_PRINT : CONFIG_RUN;
}
