/* fuzz_config.c -- the configuration loader: config_load_file on a JSON
 * file, config_set, config_load_env and config_from_args. Whatever the
 * input, each either fails with a one-line message or yields a config that
 * --print-config writes as valid JSON with every key.
 *
 * Input: one selector byte (mod 4), then:
 *   0  the file's bytes (written to a memfd, read through /proc/self/fd)
 *   1  lines "key=value" for config_set
 *   2  lines "NORMD_KEY=value", the environment for config_load_env
 *   3  lines, one argv entry each, for config_from_args (inputs that
 *      mention "config" are skipped: --config would open arbitrary paths) */
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_common.h"

enum { MAX_LINES = 32 };

static void fail_config(const char *what, const char *text) {
  fprintf(stderr, "config check failed: %s\n%s\n", what, text ? text : "");
  abort();
}

/* The message of a failed call: one non-empty line. */
static void check_err(const char *err) {
  if (err[0] == '\0' || strchr(err, '\n') != NULL)
    fail_config("error message is not one non-empty line", err);
}

/* config_print's output parses as a JSON object with every key. */
static void check_printed(const config_t *cfg) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL) return;
  config_print(cfg, f);
  fclose(f);
  json_error_t je;
  json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_integer(json_object_get(doc, "port")) ||
      !json_is_string(json_object_get(doc, "host")))
    fail_config("config_print wrote invalid JSON", text);
  json_decref(doc);
  free(text);
}

/* Splits text (NUL-terminated, modified) into at most MAX_LINES lines. */
static int split_lines(char *text, char **lines) {
  int n = 0;
  char *save = NULL;
  for (char *l = strtok_r(text, "\n", &save); l && n < MAX_LINES;
       l = strtok_r(NULL, "\n", &save))
    lines[n++] = l;
  return n;
}

static void from_file(const uint8_t *data, size_t size) {
  static int fd = -1;
  if (fd < 0) fd = memfd_create("normd-fuzz-config", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, data, size, 0) != (ssize_t)size)
    return;
  char path[64], err[512] = "";
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  config_t cfg;
  config_defaults(&cfg);
  if (config_load_file(&cfg, path, err, sizeof err) != 0) check_err(err);
  else check_printed(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int mode = data[0] % 4;
  data++;
  size--;
  if (mode == 0) {
    from_file(data, size);
    return 0;
  }
  if (memchr(data, '\0', size) != NULL) return 0; /* C strings below */
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  if (mode == 3 && strcasestr(text, "config") != NULL) {
    free(text);
    return 0;
  }
  char *lines[MAX_LINES + 2];
  char err[512] = "";
  config_t cfg;
  config_defaults(&cfg);
  if (mode == 1) {
    int n = split_lines(text, lines);
    for (int i = 0; i < n; i++) {
      char *eq = strchr(lines[i], '=');
      if (eq == NULL) continue;
      *eq = '\0';
      err[0] = '\0';
      if (config_set(&cfg, lines[i], eq + 1, err, sizeof err) != 0)
        check_err(err);
    }
    check_printed(&cfg);
  } else if (mode == 2) {
    int n = split_lines(text, lines);
    lines[n] = NULL;
    if (config_load_env(&cfg, lines, err, sizeof err) != 0) check_err(err);
    else check_printed(&cfg);
  } else {
    lines[0] = "normd";
    int n = split_lines(text, lines + 1) + 1;
    lines[n] = NULL;
    char *envp[] = {NULL};
    static FILE *out;
    if (out == NULL) out = fopen("/dev/null", "w");
    config_action_t a =
        config_from_args(&cfg, n, lines, envp, out, "fuzz", err, sizeof err);
    if (a == CONFIG_EXIT_ERR) check_err(err);
    else if (a == CONFIG_RUN || a == CONFIG_PRINT) check_printed(&cfg);
  }
  free(text);
  return 0;
}
