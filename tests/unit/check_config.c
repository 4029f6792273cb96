/* check_config.c -- server/config.c: defaults, the JSON file, NORMD_*
 * environment and flags, their precedence, --help/--version/--print-config,
 * strict integers and bounds, and the one-line message of every error path.
 * Also pins config/normd.json to the defaults table (run from the repo root)
 * so the shipped file cannot drift from the code. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define REPO_CONFIG "config/normd.json"

/* ---- helpers ------------------------------------------------------------ */

/* Writes text to a new temp file; its name goes in path (>= 32 bytes). */
static void write_temp(const char *text, char *path) {
  strcpy(path, "/tmp/normd-config-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  size_t n = strlen(text);
  ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
  close(fd);
}

/* Everything written to f so far, as a malloc'd string. */
static char *slurp(FILE *f) {
  long n = ftell(f);
  ck_assert_int_ge(n, 0);
  char *s = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(s);
  rewind(f);
  ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  return s;
}

/* Runs config_from_args on a NULL-terminated argument list (argv[0] is
 * added); the output is returned in *out (malloc'd) when out is non-NULL. */
static config_action_t run(config_t *cfg, const char *const *args,
                           char *const *envp, char **out, char *err,
                           size_t errlen) {
  char *argv[32] = {"normd"};
  int argc = 1;
  for (; args && args[argc - 1]; argc++) {
    ck_assert_int_lt(argc, 31);
    argv[argc] = (char *)args[argc - 1];
  }
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  config_action_t a =
      config_from_args(cfg, argc, argv, envp, f, "1.2.3", err, errlen);
  char *text = slurp(f);
  fclose(f);
  if (out)
    *out = text;
  else
    free(text);
  return a;
}

static char *print_to_string(const config_t *cfg) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  config_print(cfg, f);
  char *s = slurp(f);
  fclose(f);
  return s;
}

/* Error text is one line and contains want. */
#define ck_assert_err(err, want)                                               \
  do {                                                                         \
    ck_assert_msg(strstr((err), (want)) != NULL, "error \"%s\" lacks \"%s\"",  \
                  (err), (want));                                              \
    ck_assert_msg(strchr((err), '\n') == NULL, "error is not one line: %s",    \
                  (err));                                                      \
  } while (0)

/* ---- Core --------------------------------------------------------------- */

START_TEST(test_defaults) {
  config_t c;
  config_defaults(&c);
  ck_assert_str_eq(c.host, "0.0.0.0");
  ck_assert_int_eq(c.port, 8080);
  ck_assert_int_eq(c.threads, 0);
  ck_assert_int_eq(c.http_threads, 2);
  ck_assert_int_eq(c.max_body_bytes, 64 * 1024 * 1024);
  ck_assert_int_eq(c.max_elements, 16777216);
  ck_assert_int_eq(c.max_inflight, 64);
  ck_assert_int_eq(c.inline_body_bytes, 64 * 1024);
  ck_assert_int_eq(c.max_connections, 1024);
  ck_assert_int_eq(c.per_ip_connections, 0);
  ck_assert_int_eq(c.connection_timeout_s, 30);
  ck_assert_int_eq(c.request_timeout_s, 30);
  ck_assert_int_eq(c.drain_timeout_s, 30);
  ck_assert_int_eq(c.retry_after_s, 1);
  ck_assert_int_eq(c.max_json_depth, 32);
  ck_assert_int_eq(c.max_explain_elements, 65536);
  ck_assert_str_eq(c.cors_origins, "*");
  ck_assert_str_eq(c.log_level, "info");
  ck_assert_str_eq(c.log_format, "text");
  ck_assert_str_eq(c.web_root, "web");
  ck_assert_str_eq(c.openapi_path, "api/openapi.yaml");
}
END_TEST

START_TEST(test_set) {
  config_t c;
  char err[256];
  config_defaults(&c);
  ck_assert_int_eq(config_set(&c, "port", "0", err, sizeof err), 0);
  ck_assert_int_eq(c.port, 0);
  ck_assert_int_eq(
      config_set(&c, "max_body_bytes", "4294967296", err, sizeof err), 0);
  ck_assert_int_eq(c.max_body_bytes, 4294967296LL);
  ck_assert_int_eq(config_set(&c, "max_inflight", "0008", err, sizeof err), 0);
  ck_assert_int_eq(c.max_inflight, 8);
  ck_assert_int_eq(config_set(&c, "host", "::", err, sizeof err), 0);
  ck_assert_str_eq(c.host, "::");
  ck_assert_int_eq(config_set(&c, "log_level", "debug", err, sizeof err), 0);
  ck_assert_str_eq(c.log_level, "debug");
  ck_assert_int_eq(config_set(&c, "log_format", "json", err, sizeof err), 0);
  ck_assert_str_eq(c.log_format, "json");
  ck_assert_int_eq(config_set(&c, "cors_origins", "", err, sizeof err), 0);
  ck_assert_str_eq(c.cors_origins, "");
  ck_assert_int_eq(config_set(&c, "cors_origins",
                              "https://a.example,http://localhost:3000", err,
                              sizeof err),
                   0);
  ck_assert_str_eq(c.cors_origins, "https://a.example,http://localhost:3000");
  ck_assert_int_eq(config_set(&c, "web_root", "/srv/web", err, sizeof err), 0);
  ck_assert_str_eq(c.web_root, "/srv/web");
  char longest[sizeof c.host];
  memset(longest, 'h', sizeof longest - 1);
  longest[sizeof longest - 1] = '\0';
  ck_assert_int_eq(config_set(&c, "host", longest, err, sizeof err), 0);
  ck_assert_str_eq(c.host, longest);
}
END_TEST

START_TEST(test_file_valid) {
  char path[32];
  write_temp("{\"port\": 9090, \"host\": \"127.0.0.1\", \"max_inflight\": 8,\n"
             " \"_doc\": [1, 2], \"port_doc\": 5, \"whatever_doc\": null,\n"
             " \"log_level\": \"warn\"}\n",
             path);
  config_t c, want;
  char err[256] = "";
  config_defaults(&c);
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), 0);
  unlink(path);
  config_defaults(&want);
  want.port = 9090;
  want.max_inflight = 8;
  strcpy(want.host, "127.0.0.1");
  strcpy(want.log_level, "warn");
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

START_TEST(test_file_empty_object) {
  char path[32];
  write_temp("{}", path);
  config_t c, want;
  char err[256];
  config_defaults(&c);
  config_defaults(&want);
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), 0);
  unlink(path);
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

/* The shipped file holds exactly the defaults (compared as printed JSON for a
 * readable diff, then byte for byte). */
START_TEST(test_repo_file_is_defaults) {
  config_t c, want;
  char err[512] = "";
  config_defaults(&want);
  memset(&c, 0x5a, sizeof c);
  config_defaults(&c);
  ck_assert_msg(config_load_file(&c, REPO_CONFIG, err, sizeof err) == 0, "%s",
                err);
  char *got_s = print_to_string(&c), *want_s = print_to_string(&want);
  ck_assert_str_eq(got_s, want_s);
  free(got_s);
  free(want_s);
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

/* ... and names every key (with a non-empty "<key>_doc"), so a key added to
 * the table without the file fails here. */
START_TEST(test_repo_file_documents_every_key) {
  config_t d;
  config_defaults(&d);
  char *printed = print_to_string(&d);
  json_error_t je;
  json_t *keys = json_loads(printed, 0, &je);
  ck_assert_msg(keys != NULL, "%s", je.text);
  json_t *file = json_load_file(REPO_CONFIG, 0, &je);
  ck_assert_msg(file != NULL, "%s", je.text);
  const char *k;
  json_t *v;
  int n = 0;
  json_object_foreach(keys, k, v) {
    char doc[128];
    snprintf(doc, sizeof doc, "%s_doc", k);
    ck_assert_msg(json_object_get(file, k) != NULL, "%s lacks \"%s\"",
                  REPO_CONFIG, k);
    json_t *d = json_object_get(file, doc);
    ck_assert_msg(json_is_string(d) && json_string_length(d) > 10,
                  "%s lacks a \"%s\" string", REPO_CONFIG, doc);
    n++;
  }
  ck_assert_int_eq(n, 27);
  json_decref(keys);
  json_decref(file);
  free(printed);
}
END_TEST

START_TEST(test_env) {
  char *envp[] = {"PATH=/bin",
                  "NORMD_URL=http://localhost:1", /* not a key: ignored */
                  "NORMD_PORTX=1",
                  "XNORMD_PORT=2",
                  "NORMD_PORT=7070",
                  "NORMD_PORT=7071", /* the first one counts, as getenv */
                  "NORMD_CORS_ORIGINS=",
                  "NORMD_LOG_LEVEL=debug",
                  "NORMD_MAX_BODY_BYTES=1024",
                  NULL};
  config_t c;
  char err[256] = "";
  config_defaults(&c);
  ck_assert_msg(config_load_env(&c, envp, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(c.port, 7070);
  ck_assert_str_eq(c.cors_origins, "");
  ck_assert_str_eq(c.log_level, "debug");
  ck_assert_int_eq(c.max_body_bytes, 1024);
  ck_assert_int_eq(c.max_inflight, 64);
  ck_assert_int_eq(config_load_env(&c, NULL, err, sizeof err), 0);
}
END_TEST

START_TEST(test_env_overrides_file) {
  char path[32], envcfg[64];
  write_temp("{\"port\": 9090, \"max_inflight\": 8, \"log_level\": \"warn\"}",
             path);
  snprintf(envcfg, sizeof envcfg, "NORMD_CONFIG=%s", path);
  char *envp[] = {envcfg, "NORMD_PORT=7070", NULL};
  config_t c;
  char err[256] = "";
  ck_assert_int_eq(run(&c, NULL, envp, NULL, err, sizeof err), CONFIG_RUN);
  unlink(path);
  ck_assert_int_eq(c.port, 7070);
  ck_assert_int_eq(c.max_inflight, 8);
  ck_assert_str_eq(c.log_level, "warn");
}
END_TEST

START_TEST(test_flags_override_env) {
  char path[32], cfgflag[64];
  write_temp("{\"port\": 9090, \"max_inflight\": 8, \"threads\": 3}", path);
  snprintf(cfgflag, sizeof cfgflag, "--config=%s", path);
  char *envp[] = {"NORMD_PORT=7070", "NORMD_MAX_INFLIGHT=9", NULL};
  /* Flags come before --config and still win: order does not matter. */
  const char *args[] = {"--port", "6060", "--threads=5", cfgflag, NULL};
  config_t c;
  char err[256] = "";
  ck_assert_int_eq(run(&c, args, envp, NULL, err, sizeof err), CONFIG_RUN);
  unlink(path);
  ck_assert_int_eq(c.port, 6060);
  ck_assert_int_eq(c.max_inflight, 9);
  ck_assert_int_eq(c.threads, 5);
}
END_TEST

/* request_timeout_s comes from every source; 0 (no limit) is a value. */
START_TEST(test_request_timeout) {
  char path[32], envcfg[64];
  write_temp("{\"request_timeout_s\": 12}", path);
  snprintf(envcfg, sizeof envcfg, "NORMD_CONFIG=%s", path);
  config_t c;
  char err[256] = "";
  char *file_only[] = {envcfg, NULL};
  ck_assert_int_eq(run(&c, NULL, file_only, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.request_timeout_s, 12);
  char *with_env[] = {envcfg, "NORMD_REQUEST_TIMEOUT_S=0", NULL};
  ck_assert_int_eq(run(&c, NULL, with_env, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.request_timeout_s, 0);
  const char *args[] = {"--request-timeout-s", "5", NULL};
  ck_assert_int_eq(run(&c, args, with_env, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.request_timeout_s, 5);
  const char *bad[] = {"--request-timeout-s=-1", NULL};
  ck_assert_int_eq(run(&c, bad, NULL, NULL, err, sizeof err), CONFIG_EXIT_ERR);
  ck_assert_err(err, "request_timeout_s: must be between 0 and 3600, got -1");
  unlink(path);
}
END_TEST

START_TEST(test_flag_forms) {
  const char *args[] = {"--max-inflight",
                        "9",
                        "--max-connections=10",
                        "--host",
                        "::1",
                        "--cors-origins",
                        "",
                        "--log-level=error",
                        "--web-root=a=b", /* only the first '=' splits */
                        "-p",
                        "81",
                        "--per-ip-connections",
                        "4",
                        "--per-ip-connections",
                        "5", /* the last one wins */
                        NULL};
  config_t c;
  char err[256] = "";
  ck_assert_int_eq(run(&c, args, NULL, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.max_inflight, 9);
  ck_assert_int_eq(c.max_connections, 10);
  ck_assert_str_eq(c.host, "::1");
  ck_assert_str_eq(c.cors_origins, "");
  ck_assert_str_eq(c.log_level, "error");
  ck_assert_str_eq(c.web_root, "a=b");
  ck_assert_int_eq(c.port, 81);
  ck_assert_int_eq(c.per_ip_connections, 5);

  const char *joined[] = {"-p82", NULL};
  ck_assert_int_eq(run(&c, joined, NULL, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.port, 82);
  const char *long_eq[] = {"--port=83", NULL};
  ck_assert_int_eq(run(&c, long_eq, NULL, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_int_eq(c.port, 83);
}
END_TEST

START_TEST(test_no_args) {
  config_t c, want;
  char err[256];
  config_defaults(&want);
  char *envp[] = {"NORMD_CONFIG=", NULL}; /* empty: no file */
  ck_assert_int_eq(run(&c, NULL, envp, NULL, err, sizeof err), CONFIG_RUN);
  ck_assert_mem_eq(&c, &want, sizeof c);
  char *argv[] = {NULL};
  memset(&c, 0, sizeof c);
  ck_assert_int_eq(
      config_from_args(&c, 0, argv, NULL, NULL, "x", err, sizeof err),
      CONFIG_RUN);
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

/* --config beats NORMD_CONFIG; the NORMD_CONFIG file is never opened. */
START_TEST(test_config_flag_beats_env) {
  char path[32], envcfg[64];
  write_temp("{\"port\": 2222}", path);
  snprintf(envcfg, sizeof envcfg, "NORMD_CONFIG=/nonexistent/normd.json");
  char *envp[] = {envcfg, NULL};
  const char *args[] = {"--config", path, NULL};
  config_t c;
  char err[256] = "";
  ck_assert_msg(run(&c, args, envp, NULL, err, sizeof err) == CONFIG_RUN, "%s",
                err);
  unlink(path);
  ck_assert_int_eq(c.port, 2222);
}
END_TEST

START_TEST(test_print_config) {
  char path[32], envcfg[64];
  write_temp("{\"port\": 9090, \"max_inflight\": 8, \"threads\": 3,"
             " \"web_root\": \"from-file\"}",
             path);
  snprintf(envcfg, sizeof envcfg, "NORMD_CONFIG=%s", path);
  char *envp[] = {envcfg, "NORMD_PORT=7070", "NORMD_MAX_INFLIGHT=9",
                  "NORMD_HOST=say \"hi\"\\\t", NULL};
  const char *args[] = {"--print-config", "--port", "6060", NULL};
  config_t c;
  char err[256] = "", *out = NULL;
  ck_assert_int_eq(run(&c, args, envp, &out, err, sizeof err), CONFIG_PRINT);
  ck_assert_str_eq(out, ""); /* main prints, after its startup checks */
  free(out);
  out = print_to_string(&c);
  unlink(path);
  json_error_t je;
  json_t *j = json_loads(out, 0, &je);
  ck_assert_msg(j != NULL, "not JSON (%s): %s", je.text, out);
  ck_assert_int_eq(json_object_size(j), 27);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "port")), 6060);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "max_inflight")), 9);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "threads")), 3);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "retry_after_s")), 1);
  ck_assert_str_eq(json_string_value(json_object_get(j, "web_root")),
                   "from-file");
  ck_assert_str_eq(json_string_value(json_object_get(j, "host")),
                   "say \"hi\"\\\t");
  ck_assert_str_eq(json_string_value(json_object_get(j, "log_level")), "info");
  json_decref(j);

  /* One key per line, and it loads back to the same config. */
  int lines = 0;
  for (const char *p = out; *p; p++)
    lines += *p == '\n';
  ck_assert_int_eq(lines, 27 + 2);
  write_temp(out, path);
  config_t back;
  config_defaults(&back);
  ck_assert_msg(config_load_file(&back, path, err, sizeof err) == 0, "%s", err);
  unlink(path);
  ck_assert_mem_eq(&back, &c, sizeof c);
  free(out);
}
END_TEST

START_TEST(test_help) {
  config_t c;
  char err[256], *out = NULL;
  const char *args[] = {"--help", NULL};
  ck_assert_int_eq(run(&c, args, NULL, &out, err, sizeof err), CONFIG_EXIT_OK);
  ck_assert_ptr_nonnull(strstr(out, "usage: normd"));
  ck_assert_ptr_nonnull(strstr(out, "--config FILE"));
  ck_assert_ptr_nonnull(strstr(out, "NORMD_CONFIG"));
  ck_assert_ptr_nonnull(strstr(out, "--print-config"));
  ck_assert_ptr_nonnull(strstr(out, "-p, --port N"));
  ck_assert_ptr_nonnull(strstr(out, "default 8080, 0..65535, env NORMD_PORT"));
  ck_assert_ptr_nonnull(
      strstr(out, "default 64, 1..100000, env NORMD_MAX_INFLIGHT"));
  ck_assert_ptr_nonnull(strstr(out, "default \"info\", env NORMD_LOG_LEVEL"));
  ck_assert_ptr_nonnull(strstr(out, "ephemeral"));

  /* Every key has its flag and its variable in the help. */
  config_t d;
  config_defaults(&d);
  char *printed = print_to_string(&d);
  json_t *keys = json_loads(printed, 0, NULL);
  ck_assert_ptr_nonnull(keys);
  const char *k;
  json_t *v;
  json_object_foreach(keys, k, v) {
    char flag[80] = "--", var[80] = "NORMD_";
    for (size_t i = 0; k[i]; i++) {
      flag[2 + i] = k[i] == '_' ? '-' : k[i];
      flag[3 + i] = '\0';
      var[6 + i] = k[i] == '_' ? '_' : (char)(k[i] - 'a' + 'A');
      var[7 + i] = '\0';
    }
    ck_assert_msg(strstr(out, flag) != NULL, "help lacks %s", flag);
    ck_assert_msg(strstr(out, var) != NULL, "help lacks %s", var);
  }
  json_decref(keys);
  free(printed);
  free(out);

  /* -h too; help wins over values that would not validate. */
  const char *short_h[] = {"--port", "99999", "-h", NULL};
  ck_assert_int_eq(run(&c, short_h, NULL, &out, err, sizeof err),
                   CONFIG_EXIT_OK);
  ck_assert_ptr_nonnull(strstr(out, "usage"));
  free(out);
}
END_TEST

START_TEST(test_version) {
  config_t c;
  char err[256], *out = NULL;
  char *envp[] = {"NORMD_CONFIG=/nonexistent", NULL};
  const char *args[] = {"--version", NULL};
  ck_assert_int_eq(run(&c, args, envp, &out, err, sizeof err), CONFIG_EXIT_OK);
  ck_assert_str_eq(out, "normd 1.2.3\n");
  free(out);
}
END_TEST

/* ---- Errors ------------------------------------------------------------- */

typedef struct {
  const char *json;
  const char *want; /* substring of the message, after "<path>" */
} file_case_t;

static const file_case_t file_cases[] = {
    {"{\"epsilon\": 1e-5}", ": unknown key \"epsilon\""},
    {"{\"max_inflight\": 5, \"prot\": 1}", ": unknown key \"prot\""},
    {"{\"port\": \"80\"}", ": port: expected an integer, got a string"},
    {"{\"port\": 80.5}", ": port: expected an integer, got a real number"},
    {"{\"port\": 80.0}", ": port: expected an integer, got a real number"},
    {"{\"port\": 8e3}", ": port: expected an integer, got a real number"},
    {"{\"port\": true}", ": port: expected an integer, got a boolean"},
    {"{\"port\": null}", ": port: expected an integer, got null"},
    {"{\"host\": 5}", ": host: expected a string, got an integer"},
    {"{\"host\": false}", ": host: expected a string, got a boolean"},
    {"{\"log_level\": [\"info\"]}",
     ": log_level: expected a string, got an array"},
    {"{\"cors_origins\": {}}",
     ": cors_origins: expected a string, got an object"},
    {"{\"port\": 70000}", ": port: must be between 0 and 65535, got 70000"},
    {"{\"max_inflight\": 0}",
     ": max_inflight: must be between 1 and 100000, got 0"},
    {"{\"max_body_bytes\": -1}",
     ": max_body_bytes: must be between 1024 and 4294967296, got -1"},
    {"{\"log_level\": \"verbose\"}",
     ": log_level: must be one of error, warn, info, debug, got \"verbose\""},
    {"{\"host\": \"\"}", ": host: must not be empty"},
    {"{\"host\": \"a\\u0000b\"}", "invalid JSON"}, /* no JSON_ALLOW_NUL */
    {"{\"cors_origins\": \"example.com\"}",
     ": cors_origins: origin \"example.com\""},
    {"{\"port\": 1,}", ":1:"},
    {"{\"port\": 1,}", "invalid JSON"},
    {"", "invalid JSON"},
    {"{\"port\": 1} {}", "invalid JSON"},
    {"{\"port\": 1, \"port\": 2}", "invalid JSON: duplicate object key"},
    {"{\"port\": 99999999999999999999}", "invalid JSON"},
    {"[1]", ": expected a JSON object, got an array"},
};

/* Each bad file fails with "<path>..." on one line and changes nothing. */
START_TEST(test_file_errors) {
  const file_case_t *fc = &file_cases[_i];
  char path[32], err[512] = "";
  write_temp(fc->json, path);
  config_t c, want;
  config_defaults(&c);
  c.port = 4321;
  want = c;
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), -1);
  unlink(path);
  ck_assert_msg(strncmp(err, path, strlen(path)) == 0,
                "\"%s\" does not start with the path", err);
  ck_assert_err(err, fc->want);
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

START_TEST(test_file_too_long) {
  char json[2048], path[32], err[512] = "";
  int n = snprintf(json, sizeof json, "{\"host\": \"");
  memset(json + n, 'h', 256);
  strcpy(json + n + 256, "\"}");
  write_temp(json, path);
  config_t c;
  config_defaults(&c);
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), -1);
  unlink(path);
  ck_assert_err(err, ": host: too long (256 bytes, at most 255)");
}
END_TEST

START_TEST(test_file_missing) {
  config_t c;
  char err[512] = "";
  config_defaults(&c);
  ck_assert_int_eq(
      config_load_file(&c, "/nonexistent/normd.json", err, sizeof err), -1);
  ck_assert_err(err, "/nonexistent/normd.json: No such file or directory");
  ck_assert_int_eq(config_load_file(&c, "/tmp", err, sizeof err), -1);
  ck_assert_err(err, "/tmp: Is a directory");

  char *envp[] = {"NORMD_CONFIG=/nonexistent/normd.json", NULL};
  ck_assert_int_eq(run(&c, NULL, envp, NULL, err, sizeof err), CONFIG_EXIT_ERR);
  ck_assert_err(err, "/nonexistent/normd.json: No such file or directory");
  const char *args[] = {"--config", "/nonexistent/x.json", NULL};
  ck_assert_int_eq(run(&c, args, NULL, NULL, err, sizeof err), CONFIG_EXIT_ERR);
  ck_assert_err(err, "/nonexistent/x.json: No such file or directory");
}
END_TEST

typedef struct {
  const char *key, *value, *want;
} set_case_t;

static const set_case_t set_cases[] = {
    {"epsilon", "1", "unknown key \"epsilon\""},
    {"port", "80a", "port: not an integer: \"80a\""},
    {"port", " 80", "port: not an integer: \" 80\""},
    {"port", "80 ", "port: not an integer: \"80 \""},
    {"port", "", "port: not an integer: \"\""},
    {"port", "-", "port: not an integer: \"-\""},
    {"port", "+80", "port: not an integer: \"+80\""},
    {"port", "0x50", "port: not an integer: \"0x50\""},
    {"port", "8e1", "port: not an integer: \"8e1\""},
    {"port", "80.0", "port: not an integer: \"80.0\""},
    {"port", "--80", "port: not an integer: \"--80\""},
    {"port", "8\n0", "port: not an integer: \"8?0\""},
    {"port", "-1", "port: must be between 0 and 65535, got -1"},
    {"port", "99999999999999999999",
     "port: must be between 0 and 65535, got 99999999999999999999"},
    {"port", "-99999999999999999999",
     "port: must be between 0 and 65535, got -99999999999999999999"},
    {"max_body_bytes", "9223372036854775807",
     "max_body_bytes: must be between 1024 and 4294967296, got "
     "9223372036854775807"},
    {"max_inflight", "0", "max_inflight: must be between 1 and 100000, got 0"},
    {"host", "", "host: must not be empty"},
    {"web_root", "", "web_root: must not be empty"},
    {"openapi_path", "", "openapi_path: must not be empty"},
    {"log_level", "INFO",
     "log_level: must be one of error, warn, info, debug, "
     "got \"INFO\""},
    {"log_level", "", "log_level: must be one of"},
    {"log_format", "JSON", "log_format: must be text or json, got \"JSON\""},
    {"log_format", "", "log_format: must be text or json"},
    {"cors_origins", "example.com",
     "cors_origins: origin \"example.com\" must "
     "be http://host[:port] or https://host"},
    {"cors_origins", "ftp://a.example", "origin \"ftp://a.example\""},
    {"cors_origins", "https://", "origin \"https://\""},
    {"cors_origins", "https://a.example/", "origin \"https://a.example/\""},
    {"cors_origins", "https://a.example, https://b.example",
     "origin \" https://b.example\""},
    {"cors_origins", "https://a.example,,https://b.example",
     "cors_origins: empty origin"},
    {"cors_origins", "https://a.example,", "cors_origins: empty origin"},
    {"cors_origins", "*,https://a.example",
     "cors_origins: \"*\" must stand alone"},
    {"cors_origins", "https://a.example,*",
     "cors_origins: \"*\" must stand alone"},
};

START_TEST(test_set_errors) {
  const set_case_t *sc = &set_cases[_i];
  config_t c, want;
  char err[512] = "";
  config_defaults(&c);
  want = c;
  ck_assert_msg(config_set(&c, sc->key, sc->value, err, sizeof err) == -1,
                "%s=\"%s\" accepted", sc->key, sc->value);
  ck_assert_err(err, sc->want);
  ck_assert_mem_eq(&c, &want, sizeof c);
}
END_TEST

START_TEST(test_set_too_long) {
  config_t c;
  char err[256] = "", big[2000];
  config_defaults(&c);
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ck_assert_int_eq(config_set(&c, "web_root", big, err, sizeof err), -1);
  ck_assert_err(err, "web_root: too long (1999 bytes, at most 1023)");
  big[sizeof c.log_level] = '\0';
  ck_assert_int_eq(config_set(&c, "log_level", big, err, sizeof err), -1);
  ck_assert_err(err, "log_level: too long (16 bytes, at most 15)");
  /* A long bad value is echoed cut short; the message stays bounded. */
  big[sizeof c.log_level] = 'x';
  ck_assert_int_eq(config_set(&c, "port", big, err, sizeof err), -1);
  ck_assert_err(err, "port: not an integer: \"xxx");
  ck_assert_err(err, "...\"");
  /* No err buffer: still fails cleanly. */
  ck_assert_int_eq(config_set(&c, "port", "x", NULL, 0), -1);
  ck_assert_int_eq(config_set(&c, "port", "x", err, 4), -1);
  ck_assert_str_eq(err, "por");
}
END_TEST

START_TEST(test_env_errors) {
  static const struct {
    const char *var, *want;
  } cases[] = {
      {"NORMD_PORT=80a", "NORMD_PORT: not an integer: \"80a\""},
      {"NORMD_PORT=", "NORMD_PORT: not an integer: \"\""},
      {"NORMD_MAX_INFLIGHT=0",
       "NORMD_MAX_INFLIGHT: must be between 1 and 100000, got 0"},
      {"NORMD_LOG_LEVEL=loud", "NORMD_LOG_LEVEL: must be one of error, warn, "
                               "info, debug, got \"loud\""},
      {"NORMD_HOST=", "NORMD_HOST: must not be empty"},
      {"NORMD_CORS_ORIGINS=*,http://a", "NORMD_CORS_ORIGINS: \"*\" must stand"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *envp[] = {"NORMD_THREADS=4", (char *)cases[i].var, NULL};
    config_t c, want;
    char err[512] = "";
    config_defaults(&c);
    want = c;
    ck_assert_int_eq(config_load_env(&c, envp, err, sizeof err), -1);
    ck_assert_err(err, cases[i].want);
    ck_assert_mem_eq(&c, &want, sizeof c); /* NORMD_THREADS not applied */

    ck_assert_int_eq(run(&c, NULL, envp, NULL, err, sizeof err),
                     CONFIG_EXIT_ERR);
    ck_assert_err(err, cases[i].want);
  }
}
END_TEST

typedef struct {
  const char *args[4];
  const char *want;
} flag_case_t;

static const flag_case_t flag_cases[] = {
    {{"--prot", "80"}, "unknown option --prot"},
    {{"--prot=80"}, "unknown option --prot"},
    {{"--max_inflight", "3"}, "unknown option --max_inflight"},
    {{"--Port", "3"}, "unknown option --Port"},
    {{"--"}, "unknown option --"},
    {{"-x"}, "unknown option -x"},
    {{"-"}, "unexpected argument \"-\""},
    {{"serve"}, "unexpected argument \"serve\""},
    {{"--port"}, "option --port needs a value"},
    {{"-p"}, "option -p needs a value"},
    {{"--threads", "1", "--config"}, "option --config needs a value"},
    {{"--config="}, "option --config needs a file name"},
    {{"--help=yes"}, "option --help takes no value"},
    {{"--version=1"}, "option --version takes no value"},
    {{"--print-config=1"}, "option --print-config takes no value"},
    {{"--max-inflight=0"}, "max_inflight: must be between 1 and 100000, got 0"},
    {{"--max-inflight", "0"},
     "max_inflight: must be between 1 and 100000, got 0"},
    {{"-p", "80a"}, "port: not an integer: \"80a\""},
    {{"-p80a"}, "port: not an integer: \"80a\""},
    {{"--port", "--host"}, "port: not an integer: \"--host\""},
    {{"--host="}, "host: must not be empty"},
    {{"--log-level", "trace"}, "log_level: must be one of"},
    {{"--log-format", "logfmt"}, "log_format: must be text or json"},
    /* A bad option is reported even with --help after it. */
    {{"--prot", "--help"}, "unknown option --prot"},
};

START_TEST(test_flag_errors) {
  const flag_case_t *fc = &flag_cases[_i];
  config_t c, want;
  char err[512] = "", *out = NULL;
  memset(&c, 0x11, sizeof c);
  want = c;
  ck_assert_int_eq(run(&c, fc->args, NULL, &out, err, sizeof err),
                   CONFIG_EXIT_ERR);
  ck_assert_err(err, fc->want);
  ck_assert_str_eq(out, ""); /* nothing printed; the caller reports err */
  ck_assert_mem_eq(&c, &want, sizeof c);
  free(out);
}
END_TEST

/* A bad file is reported even when the flags would override the bad key. */
START_TEST(test_bad_file_with_flag) {
  char path[32], err[512] = "";
  write_temp("{\"port\": \"x\"}", path);
  const char *args[] = {"--port",         "1", "--config", path,
                        "--print-config", NULL};
  config_t c;
  char *out = NULL;
  ck_assert_int_eq(run(&c, args, NULL, &out, err, sizeof err), CONFIG_EXIT_ERR);
  unlink(path);
  ck_assert_err(err, ": port: expected an integer, got a string");
  ck_assert_str_eq(out, "");
  free(out);
}
END_TEST

/* ---- Limits ------------------------------------------------------------- */

typedef struct {
  const char *key;
  long long min, max;
} bounds_t;

/* The bounds promised in config.h's documentation and config/README.md. */
static const bounds_t bounds[] = {
    {"port", 0, 65535},
    {"threads", 0, 256},
    {"http_threads", 1, 64},
    {"max_body_bytes", 1024, 4294967296LL},
    {"max_elements", 1, 2147483648LL},
    {"max_inflight", 1, 100000},
    {"inline_body_bytes", 0, 4294967296LL},
    {"max_connections", 1, 100000},
    {"per_ip_connections", 0, 100000},
    {"connection_timeout_s", 1, 3600},
    {"request_timeout_s", 0, 3600},
    {"drain_timeout_s", 0, 3600},
    {"retry_after_s", 1, 3600},
    {"max_json_depth", 2, 1000},
    {"max_explain_elements", 1, INT64_C(1) << 24},
};

START_TEST(test_bounds) {
  const bounds_t *b = &bounds[_i];
  config_t c;
  char v[32], err[256] = "", want[160];
  config_defaults(&c);
  snprintf(v, sizeof v, "%lld", b->min);
  ck_assert_msg(config_set(&c, b->key, v, err, sizeof err) == 0, "%s", err);
  snprintf(v, sizeof v, "%lld", b->max);
  ck_assert_msg(config_set(&c, b->key, v, err, sizeof err) == 0, "%s", err);

  snprintf(v, sizeof v, "%lld", b->min - 1);
  ck_assert_int_eq(config_set(&c, b->key, v, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: must be between %lld and %lld, got %lld",
           b->key, b->min, b->max, b->min - 1);
  ck_assert_str_eq(err, want);

  snprintf(v, sizeof v, "%lld", b->max + 1);
  ck_assert_int_eq(config_set(&c, b->key, v, err, sizeof err), -1);
  snprintf(want, sizeof want, "%s: must be between %lld and %lld, got %lld",
           b->key, b->min, b->max, b->max + 1);
  ck_assert_str_eq(err, want);
}
END_TEST

/* compression is a boolean: true / false in the file, true / false / 1 / 0
 * as text, anything else refused with the key's name. */
START_TEST(test_boolean_key) {
  config_t c;
  char err[256] = "", path[32];
  config_defaults(&c);
  ck_assert_int_eq(c.compression, 1);
  ck_assert_int_eq(config_set(&c, "compression", "false", err, sizeof err), 0);
  ck_assert_int_eq(c.compression, 0);
  ck_assert_int_eq(config_set(&c, "compression", "1", err, sizeof err), 0);
  ck_assert_int_eq(c.compression, 1);
  ck_assert_int_eq(config_set(&c, "compression", "yes", err, sizeof err), -1);
  ck_assert_err(err, "compression: must be true or false, got \"yes\"");
  write_temp("{\"compression\": false}", path);
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), 0);
  ck_assert_int_eq(c.compression, 0);
  unlink(path);
  write_temp("{\"compression\": 0}", path);
  ck_assert_int_eq(config_load_file(&c, path, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "compression: expected true or false, got an "
                            "integer") != NULL, "%s", err);
  unlink(path);
  char *printed = print_to_string(&c);
  ck_assert_msg(strstr(printed, "\"compression\": false") != NULL, "%s",
                printed);
  free(printed);
}
END_TEST

Suite *config_suite(void) {
  Suite *s = suite_create("config");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_defaults);
  tcase_add_test(core, test_set);
  tcase_add_test(core, test_file_valid);
  tcase_add_test(core, test_file_empty_object);
  tcase_add_test(core, test_repo_file_is_defaults);
  tcase_add_test(core, test_repo_file_documents_every_key);
  tcase_add_test(core, test_env);
  tcase_add_test(core, test_env_overrides_file);
  tcase_add_test(core, test_flags_override_env);
  tcase_add_test(core, test_flag_forms);
  tcase_add_test(core, test_request_timeout);
  tcase_add_test(core, test_no_args);
  tcase_add_test(core, test_config_flag_beats_env);
  tcase_add_test(core, test_print_config);
  tcase_add_test(core, test_boolean_key);
  tcase_add_test(core, test_help);
  tcase_add_test(core, test_version);
  suite_add_tcase(s, core);

  TCase *errors = tcase_create("Errors");
  tcase_add_loop_test(errors, test_file_errors, 0,
                      sizeof file_cases / sizeof file_cases[0]);
  tcase_add_test(errors, test_file_too_long);
  tcase_add_test(errors, test_file_missing);
  tcase_add_loop_test(errors, test_set_errors, 0,
                      sizeof set_cases / sizeof set_cases[0]);
  tcase_add_test(errors, test_set_too_long);
  tcase_add_test(errors, test_env_errors);
  tcase_add_loop_test(errors, test_flag_errors, 0,
                      sizeof flag_cases / sizeof flag_cases[0]);
  tcase_add_test(errors, test_bad_file_with_flag);
  suite_add_tcase(s, errors);

  TCase *limits = tcase_create("Limits");
  tcase_add_loop_test(limits, test_bounds, 0, sizeof bounds / sizeof bounds[0]);
  suite_add_tcase(s, limits);
  return s;
}
