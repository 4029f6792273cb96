/* client.c -- normd from C: libcurl for HTTP, jansson for JSON. Sends the
 * textbook layer norm and a group norm, prints the normalized tensors and
 * their statistics, and exits non-zero on any error (an error answer is an
 * RFC 9457 problem: its code and detail are printed).
 *
 *   make build/examples/client && build/examples/client
 *   NORMD_URL=http://host:9000 build/examples/client
 *   NORMD_API_KEY=... build/examples/client     (when the daemon has keys)
 *
 * Build by hand: cc -std=c11 examples/client.c $(pkg-config --cflags --libs
 * libcurl jansson) -o client   (Debian: libcurl4-openssl-dev libjansson-dev)
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing buffer for the answer; freed by the caller. */
typedef struct {
  char *data;
  size_t len;
} answer_t;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
  answer_t *a = userdata;
  size_t n = size * nmemb;
  char *p = realloc(a->data, a->len + n + 1);
  if (p == NULL) return 0; /* curl then fails the transfer */
  memcpy(p + a->len, ptr, n);
  a->data = p;
  a->len += n;
  a->data[a->len] = '\0';
  return n;
}

/* POSTs the JSON text body to base + path; returns the parsed answer (the
 * caller's to json_decref) or NULL after printing why. */
static json_t *post_json(CURL *curl, const char *base, const char *path,
                         const char *body) {
  char url[1024], auth[512];
  answer_t a = {NULL, 0};
  json_t *doc = NULL;
  long status = 0;
  struct curl_slist *headers =
      curl_slist_append(NULL, "Content-Type: application/json");
  const char *key = getenv("NORMD_API_KEY");
  if (key && *key) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    headers = curl_slist_append(headers, auth);
  }
  snprintf(url, sizeof url, "%s%s", base, path);
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    fprintf(stderr, "client: %s: %s\n", url, curl_easy_strerror(rc));
    goto done;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  json_error_t err;
  doc = json_loadb(a.data ? a.data : "", a.len, 0, &err);
  if (doc == NULL) {
    fprintf(stderr, "client: %s: answer is not JSON (%s)\n", url, err.text);
  } else if (status != 200) {
    fprintf(stderr, "client: %s: %ld %s: %s\n", url, status,
            json_string_value(json_object_get(doc, "code")),
            json_string_value(json_object_get(doc, "detail")));
    json_decref(doc);
    doc = NULL;
  }
done:
  free(a.data);
  return doc;
}

/* Prints "name: [v, v, ...]" for a JSON array of numbers (or the strings
 * "NaN", "Infinity", "-Infinity" normd uses for non-finite values). */
static void print_numbers(const char *name, const json_t *arr) {
  size_t i;
  json_t *v;
  printf("%s: [", name);
  json_array_foreach(arr, i, v) {
    if (json_is_number(v)) printf("%s%.8g", i ? ", " : "", json_number_value(v));
    else printf("%s%s", i ? ", " : "", json_string_value(v));
  }
  printf("]\n");
}

/* Prints a norm answer: the output tensor and the statistics. */
static int print_norm(const char *what, const json_t *doc) {
  const json_t *output = json_object_get(doc, "output");
  const json_t *stats = json_object_get(doc, "stats");
  const json_t *shape = json_object_get(output, "shape");
  if (!json_is_array(json_object_get(output, "data")) || !json_is_object(stats)) {
    fprintf(stderr, "client: %s: no output or stats in the answer\n", what);
    return -1;
  }
  printf("%s, output shape [", what);
  for (size_t i = 0; i < json_array_size(shape); i++)
    printf("%s%lld", i ? ", " : "",
           (long long)json_integer_value(json_array_get(shape, i)));
  printf("] %s\n", json_string_value(json_object_get(output, "dtype")));
  print_numbers("  output", json_object_get(output, "data"));
  print_numbers("  mean", json_object_get(stats, "mean"));
  print_numbers("  var", json_object_get(stats, "var"));
  print_numbers("  rstd", json_object_get(stats, "rstd"));
  return 0;
}

int main(void) {
  const char *base = getenv("NORMD_URL");
  if (base == NULL || *base == '\0') base = "http://localhost:8080";
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  CURL *curl = curl_easy_init();
  int rc = 1;
  json_t *layer = NULL, *group = NULL;
  if (curl == NULL) goto done;

  layer = post_json(curl, base, "/v1/norm/layer",
                    "{\"input\": [[1, 2, 3, 4, 5], [2, 4, 6, 8, 10]]}");
  if (layer == NULL || print_norm("layer norm", layer) != 0) goto done;
  group = post_json(curl, base, "/v1/norm/group",
                    "{\"input\": {\"shape\": [1, 4, 2], \"data\": [1, 2, 3, 4, "
                    "5, 6, 7, 8]}, \"num_groups\": 2}");
  if (group == NULL || print_norm("group norm", group) != 0) goto done;
  /* the row means of the textbook example are 3 and 6 */
  const json_t *mean = json_object_get(json_object_get(layer, "stats"), "mean");
  if (json_number_value(json_array_get(mean, 0)) != 3.0 ||
      json_number_value(json_array_get(mean, 1)) != 6.0) {
    fprintf(stderr, "client: unexpected layer norm means\n");
    goto done;
  }
  printf("client.c: ok\n");
  rc = 0;

done:
  json_decref(layer);
  json_decref(group);
  if (curl) curl_easy_cleanup(curl);
  curl_global_cleanup();
  return rc;
}
