/* check_main.c -- runs every suite listed in suites.h in one SRunner, so the
 * closing line is Check's overall summary. Exit status is non-zero on any
 * failure. Run from the repository root (fixtures are read by path).
 * `check_unit --simd` prints the kernel table the tests would run with (as
 * NORM_SIMD chooses it) and exits: the Makefile's per-ISA loop asks it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "suites.h"

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--simd") == 0) {
    puts(norm_simd_name());
    return EXIT_SUCCESS;
  }
  SRunner *runner = srunner_create(NULL);
#define UNIT_ADD_(name) srunner_add_suite(runner, name##_suite());
  UNIT_SUITES(UNIT_ADD_)
#undef UNIT_ADD_
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
