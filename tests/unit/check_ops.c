/* check_ops.c -- the operation list (server/ops.h) against the contract,
 * api/openapi.yaml: every /v1 compute path (a path with a `post`) is the
 * route of one operation and every operation's route is such a path; every
 * model enum of the spec names exactly the operations' KServe v2 models.
 * Run from the repository root (spec.h reads the file). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.h"
#include "ops.h"
#include "op_stats.h"
#include "router.h"
#include "spec.h"
#include "suites.h"

START_TEST(test_routes_match_spec) {
  char *text = spec_text();
  static names_t posts;
  posts.n = 0;
  spec_post_paths(text, &posts);
  ck_assert_int_gt(posts.n, 0);
  /* every operation's route is a compute path of the spec ... */
  for (int op = 0; op < OP_COUNT; op++)
    ck_assert_msg(names_has(&posts, op_info((op_t)op)->route),
                  "operation %s: route %s is not a POST path of %s",
                  op_name((op_t)op), op_info((op_t)op)->route, SPEC_PATH);
  /* ... and every /v1 compute path of the spec is an operation's route */
  int v1 = 0;
  for (int i = 0; i < posts.n; i++) {
    if (strncmp(posts.name[i], "/v1/", 4) != 0) continue;
    v1++;
    int found = 0;
    for (int op = 0; op < OP_COUNT; op++)
      found |= strcmp(op_info((op_t)op)->route, posts.name[i]) == 0;
    ck_assert_msg(found, "%s: POST %s has no row in OPS_MAP (server/ops.h)",
                  SPEC_PATH, posts.name[i]);
  }
  ck_assert_int_eq(v1, OP_COUNT);
  free(text);
}
END_TEST

START_TEST(test_models_match_spec) {
  char *text = spec_text();
  const char *first = NULL;
  int nmodels = 0;
  for (int op = 0; op < OP_COUNT; op++)
    if (op_info((op_t)op)->model != NULL) {
      nmodels++;
      if (first == NULL) first = op_info((op_t)op)->model;
    }
  ck_assert_ptr_nonnull(first);
  static names_t lists[16];
  int nlists = spec_enums_with(text, first, lists, 16);
  ck_assert_msg(nlists >= 1, "%s: no enum lists the model %s", SPEC_PATH,
                first);
  for (int k = 0; k < nlists; k++) {
    ck_assert_msg(lists[k].n == nmodels,
                  "%s: a model enum has %d names, OPS_MAP %d models", SPEC_PATH,
                  lists[k].n, nmodels);
    for (int i = 0; i < lists[k].n; i++) {
      op_t op;
      ck_assert_msg(kserve_model_op(lists[k].name[i], &op) == 0,
                    "%s: model %s has no row in OPS_MAP", SPEC_PATH,
                    lists[k].name[i]);
    }
  }
  free(text);
}
END_TEST

/* What the list gives the tables built from it. */
START_TEST(test_list_feeds_tables) {
  for (int op = 0; op < OP_COUNT; op++) {
    const op_info_t *info = op_info((op_t)op);
    ck_assert_ptr_nonnull(info->name);
    ck_assert_str_eq(op_name((op_t)op), info->name);
    route_match_t m;
    router_match(info->route, &m);
    ck_assert_ptr_nonnull(m.route);
    ck_assert_int_eq(m.route->handler, H_COMPUTE);
    ck_assert_int_eq(m.op, op);
    if (info->model != NULL) {
      op_t back;
      ck_assert_int_eq(kserve_model_op(info->model, &back), 0);
      ck_assert_int_eq(back, op);
      ck_assert_str_eq(kserve_model_name((op_t)op), info->model);
      char path[128];
      snprintf(path, sizeof path, "/v2/models/%s/infer", info->model);
      router_match(path, &m);
      ck_assert(m.model_known);
      ck_assert_int_eq(m.op, op);
    }
    for (int other = 0; other < op; other++) {
      ck_assert_str_ne(op_info((op_t)other)->name, info->name);
      ck_assert_str_ne(op_info((op_t)other)->route, info->route);
    }
  }
  ck_assert_str_eq(op_name(OP_COUNT), "unknown");
}
END_TEST

/* The protocol is decided by the path alone, unknown paths included. */
START_TEST(test_v2_paths) {
  ck_assert(router_is_v2("/v2"));
  ck_assert(router_is_v2("/v2/"));
  ck_assert(router_is_v2("/v2/no/such/route"));
  ck_assert(!router_is_v2("/v2x"));
  ck_assert(!router_is_v2("/v1/norm/layer"));
  ck_assert(!router_is_v2("/"));
}
END_TEST

/* Templates: {model} with an optional /versions/<v>, {region} any one
 * segment, exact paths before templates. */
START_TEST(test_route_templates) {
  route_match_t m;
  router_match("/v2/models/stats", &m);
  ck_assert_ptr_nonnull(m.route);
  ck_assert_int_eq(m.route->handler, H_V2_STATS);
  router_match("/v2/models/rms_norm/versions/1/stats", &m);
  ck_assert_int_eq(m.route->handler, H_V2_MODEL_STATS);
  ck_assert(m.model_known);
  ck_assert_int_eq(m.op, OP_RMS);
  router_match("/v2/models/rms_norm/versions/2/config", &m);
  ck_assert_int_eq(m.route->handler, H_V2_MODEL_CONFIG);
  ck_assert(!m.model_known);
  router_match("/v2/models/softmax/config", &m);
  ck_assert_str_eq(m.model, "softmax");
  ck_assert(!m.model_known);
  router_match("/v2/repository/models/lrn/unload", &m);
  ck_assert_int_eq(m.route->handler, H_V2_REPOSITORY_LOAD);
  ck_assert_int_eq(m.op, OP_LRN);
  router_match("/v2/cudasharedmemory/region/r0/register", &m);
  ck_assert_int_eq(m.route->handler, H_V2_UNSUPPORTED);
  ck_assert(router_allows(m.route, "POST"));
  ck_assert(!router_allows(m.route, "GET"));
  ck_assert(router_allows(m.route, "OPTIONS"));
  /* versions only after a /v2/models/ model, and never empty */
  router_match("/v2/repository/models/lrn/versions/1/load", &m);
  ck_assert_ptr_null(m.route);
  router_match("/v2/models/lrn/versions//config", &m);
  ck_assert_ptr_null(m.route);
  router_match("/v2/models/lrn/", &m);
  ck_assert_ptr_null(m.route);
  router_match("/v2/systemsharedmemory/region//status", &m);
  ck_assert_ptr_null(m.route);
  router_match("/v2/trace/setting", &m);
  ck_assert(router_allows(m.route, "GET") && router_allows(m.route, "HEAD") &&
            router_allows(m.route, "POST") && !router_allows(m.route, "PUT"));
  /* every route fits metrics' label table (metrics.c MAX_ROUTES) */
  ck_assert_uint_lt(router_count + 1, 64);
}
END_TEST

/* A success counts its stages and its whole time; a failure only in fail. */
START_TEST(test_op_stats_record) {
  op_stats_reset();
  op_timing_t ok = {.queue_ns = 10, .input_ns = 20, .infer_ns = 30,
                    .output_ns = 40};
  op_stats_record(OP_GROUP, &ok, 1);
  op_stats_record(OP_GROUP, &ok, 1);
  op_timing_t bad = {.queue_ns = 5, .input_ns = 7};
  op_stats_record(OP_GROUP, &bad, 0);
  op_stats_record(OP_COUNT, &ok, 1); /* past the list: ignored */
  op_stats_t s;
  op_stats_read(OP_GROUP, &s);
  ck_assert_uint_eq(s.success.count, 2);
  ck_assert_uint_eq(s.success.ns, 200);
  ck_assert_uint_eq(s.fail.count, 1);
  ck_assert_uint_eq(s.fail.ns, 12);
  ck_assert_uint_eq(s.queue.count, 2);
  ck_assert_uint_eq(s.queue.ns, 20);
  ck_assert_uint_eq(s.compute_input.ns, 40);
  ck_assert_uint_eq(s.compute_infer.ns, 60);
  ck_assert_uint_eq(s.compute_output.ns, 80);
  ck_assert_uint_eq(s.inference_count, 2);
  ck_assert_uint_eq(s.execution_count, 2);
  ck_assert_uint_gt(s.last_inference_ms, 1600000000000ull); /* after 2020 */
  op_stats_read(OP_LAYER, &s);
  ck_assert_uint_eq(s.success.count + s.fail.count, 0);
  ck_assert_uint_eq(s.last_inference_ms, 0);
  op_stats_reset();
}
END_TEST

Suite *ops_suite(void) {
  Suite *s = suite_create("ops");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_list_feeds_tables);
  tcase_add_test(tc, test_routes_match_spec);
  tcase_add_test(tc, test_models_match_spec);
  tcase_add_test(tc, test_v2_paths);
  tcase_add_test(tc, test_route_templates);
  suite_add_tcase(s, tc);
  TCase *stats = tcase_create("Stats");
  tcase_add_test(stats, test_op_stats_record);
  suite_add_tcase(s, stats);
  return s;
}
