/* fuzz_request.c -- the whole request path in-process, without a socket:
 * raw HTTP/1.1 request bytes -> route -> headers and query -> decode ->
 * compute -> encode -> reply. The request line and headers are split as
 * libmicrohttpd would (router_unescape for path and query, first header
 * of a name wins, names case-insensitive); everything after the blank line is
 * the body. Requests that normd answers on the HTTP thread (http_admit.c,
 * http_get.c: 404, 405, OPTIONS, GET routes, > 64 query parameters) stop
 * before service_handle; every other one must get a well-formed reply
 * (fuzz_common.h).
 *
 * Input: "POST /v1/norm/layer?eps=0.1 HTTP/1.1\r\nContent-Type: ...\r\n
 * \r\n{...}"; line ends may be \r\n or \n. */
#include <strings.h>

#include "fuzz_common.h"

enum { MAX_PARAMS = 64, MAX_HEADERS = 64 };

/* The next line of the head (its end cut off), or NULL past the head. */
static char *next_line(char **p) {
  char *line = *p;
  if (line == NULL || *line == '\0') return NULL;
  char *nl = strchr(line, '\n');
  if (nl) {
    *nl = '\0';
    *p = nl + 1;
  } else {
    *p = line + strlen(line);
  }
  size_t n = strlen(line);
  if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
  return line;
}

typedef struct {
  char *name, *value;
} header_t;

static const char *find_header(const header_t *h, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(h[i].name, name) == 0) return h[i].value;
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_init_once();
  /* The head ends at the first blank line; the body is the rest. */
  const uint8_t *end = NULL;
  size_t body_at = size;
  for (size_t i = 0; i + 1 < size; i++) {
    if (data[i] == '\n' && data[i + 1] == '\n') {
      end = data + i, body_at = i + 2;
      break;
    }
    if (i + 2 < size && data[i] == '\n' && data[i + 1] == '\r' &&
        data[i + 2] == '\n') {
      end = data + i, body_at = i + 3;
      break;
    }
  }
  size_t head_len = end ? (size_t)(end - data) : size;
  if (memchr(data, '\0', head_len) != NULL) return 0; /* MHD refuses those */
  char *head = malloc(head_len + 1);
  if (head == NULL) return 0;
  memcpy(head, data, head_len);
  head[head_len] = '\0';

  char *p = head;
  char *request_line = next_line(&p);
  char *method = request_line ? strtok(request_line, " ") : NULL;
  char *target = method ? strtok(NULL, " ") : NULL;
  if (target == NULL) goto out;
  header_t headers[MAX_HEADERS];
  int nheaders = 0;
  for (char *line; (line = next_line(&p)) != NULL && nheaders < MAX_HEADERS;) {
    char *colon = strchr(line, ':');
    if (colon == NULL) continue;
    *colon = '\0';
    char *value = colon + 1;
    while (*value == ' ' || *value == '\t') value++;
    headers[nheaders++] = (header_t){line, value};
  }

  char *query = strchr(target, '?');
  if (query) *query++ = '\0';
  router_unescape(target);
  route_match_t m;
  router_match(target, &m);
  if (m.route == NULL || m.route->handler != H_COMPUTE ||
      !router_allows(m.route, method) || strcmp(method, "POST") != 0 ||
      (router_is_v2(target) && !m.model_known))
    goto out; /* answered on the HTTP thread (http_admit.c) */

  query_param_t params[MAX_PARAMS];
  size_t nparams = 0;
  char *save = NULL;
  for (char *item = query ? strtok_r(query, "&", &save) : NULL; item;
       item = strtok_r(NULL, "&", &save)) {
    if (nparams == MAX_PARAMS) goto out; /* 400 too_many_parameters */
    char *eq = strchr(item, '=');
    if (eq) *eq = '\0';
    router_unescape(item);
    if (eq) router_unescape(eq + 1);
    params[nparams].key = item;
    params[nparams].value = eq ? eq + 1 : NULL;
    nparams++;
  }

  size_t len = size - body_at;
  char *body = malloc(len + 1); /* the daemon's body buffer is malloc'd */
  if (body == NULL) goto out;
  memcpy(body, data + body_at, len);
  service_input_t in = {
      .op = m.op, .body = body, .len = len,
      .content_type = find_header(headers, nheaders, "Content-Type"),
      .accept = find_header(headers, nheaders, "Accept"),
      .header_length =
          find_header(headers, nheaders, "Inference-Header-Content-Length"),
      .query = params, .nquery = nparams, .kserve = router_is_v2(target)};
  fuzz_service(&in);
  free(body);
out:
  free(head);
  return 0;
}
