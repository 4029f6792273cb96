/* spec.h -- api/openapi.yaml read as text, for the unit tests that check a
 * list of the server against the contract (check_ops.c, check_problem.c).
 * The file is ours and keeps one layout: paths at two spaces under
 * `paths:`, their methods at four, enums as flow lists (`enum: [a, b]`) or
 * block lists (`- a` lines under `enum:`). Run from the repository root. */
#ifndef TESTS_SPEC_H
#define TESTS_SPEC_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_PATH "api/openapi.yaml"

/* Up to 256 names of up to 96 bytes. */
typedef struct {
  char name[256][96];
  int n;
} names_t;

static inline void names_add(names_t *s, const char *p, size_t len) {
  ck_assert_int_lt(s->n, 256);
  ck_assert_uint_lt(len, sizeof s->name[0]);
  memcpy(s->name[s->n], p, len);
  s->name[s->n][len] = '\0';
  s->n++;
}

static inline int names_has(const names_t *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->name[i], name) == 0) return 1;
  return 0;
}

/* A whole file, NUL-terminated (malloc'd), or NULL. */
static inline char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *text = NULL;
  long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (text = malloc((size_t)len + 1))) {
    if (fread(text, 1, (size_t)len, f) != (size_t)len) {
      free(text);
      text = NULL;
    } else {
      text[len] = '\0';
    }
  }
  fclose(f);
  return text;
}

static inline char *spec_text(void) {
  char *text = read_text(SPEC_PATH);
  ck_assert_msg(text != NULL, "%s: cannot read (run from the repository root)",
                SPEC_PATH);
  return text;
}

/* The paths under `paths:` that have a `post:` operation. */
static inline void spec_post_paths(const char *text, names_t *out) {
  const char *paths = strstr(text, "\npaths:\n");
  ck_assert_ptr_nonnull(paths);
  char current[96] = "";
  for (const char *line = paths + 8; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (len > 0 && line[0] != ' ' && line[0] != '#') break; /* next section */
    if (len > 3 && strncmp(line, "  /", 3) == 0 && line[len - 1] == ':') {
      snprintf(current, sizeof current, "%.*s", (int)(len - 3), line + 2);
    } else if (len == 9 && strncmp(line, "    post:", 9) == 0 && current[0]) {
      names_add(out, current, strlen(current));
    }
    line = end ? end + 1 : line + len;
  }
}

/* Every flow-list enum (`enum: [a, b, ...]`) that names `member`. */
static inline int spec_enums_with(const char *text, const char *member, names_t *lists,
                           int max) {
  int n = 0;
  for (const char *p = strstr(text, "enum: ["); p;
       p = strstr(p + 1, "enum: [")) {
    const char *open = p + 7, *close = strchr(open, ']');
    ck_assert_ptr_nonnull(close);
    names_t items = {.n = 0};
    for (const char *q = open; q < close;) {
      q += strspn(q, " ,");
      size_t len = strcspn(q, ",]");
      while (len > 0 && q[len - 1] == ' ') len--;
      if (len > 0) names_add(&items, q, len);
      q += len;
    }
    if (names_has(&items, member)) {
      ck_assert_int_lt(n, max);
      lists[n++] = items;
    }
  }
  return n;
}

/* The block-list enum (`- name` lines) of the schema `schema`, under
 * components.schemas. */
static inline void spec_schema_enum(const char *text, const char *schema,
                                    names_t *out) {
  char key[128];
  snprintf(key, sizeof key, "\n    %s:\n", schema);
  const char *at = strstr(text, key);
  ck_assert_msg(at != NULL, "%s: no schema %s", SPEC_PATH, schema);
  const char *next = at + strlen(key);
  /* the schema ends at the next line indented 4 or less */
  const char *end = next;
  while ((end = strchr(end, '\n')) != NULL &&
         !(end[1] != '\0' && end[1] != '\n' &&
           strspn(end + 1, " ") <= 4 && end[1 + strspn(end + 1, " ")] != '\n'))
    end++;
  static const char enum_key[] = "\n      enum:\n";
  const char *list = strstr(next, enum_key);
  ck_assert_msg(list != NULL && (end == NULL || list < end),
                "%s: schema %s has no block-list enum", SPEC_PATH, schema);
  for (const char *line = list + strlen(enum_key); strncmp(line, "        - ", 10) == 0;) {
    const char *item = line + 10;
    size_t len = strcspn(item, "\n");
    names_add(out, item, len);
    line = item + len + (item[len] == '\n');
  }
}

#endif
