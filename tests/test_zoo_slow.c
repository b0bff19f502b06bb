/* test_zoo_slow.c: the defect zoo scored end to end (label slow, -DPEAT_SLOW_TESTS=ON; ~5 min on
 * two cores): every defect caught, no honest kernel flagged, >= 90% with the right class. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "harness/run/calibrate.h"

Test(zoo, every_defect_caught_no_false_alarm, .timeout = 1800)
{
    peat_zoo_entry *e = calloc(PEAT_ZOO_MAX, sizeof *e);
    int n = 0;
    cr_assert_eq(peat_run_calibrate_zoo(PEAT_TEST_ZOO,
                                        PEAT_TEST_SOURCE_DIR "/tests/zoo/manifest.tsv",
                                        "test-out/zoo", 1, e, &n, stdout),
                 PEAT_OK);
    peat_zoo_score s = peat_run_calibrate_zoo_print(stdout, e, n);
    cr_expect_geq(s.defects, 25);
    cr_expect_geq(s.honest, 8);
    for (int i = 0; i < n; i++)
        cr_expect(e[i].honest ? e[i].verdict == PEAT_ACCEPT_PASS : e[i].verdict != PEAT_ACCEPT_PASS,
                  "%s: %s %s", e[i].kernel, peat_detector_finding_name(e[i].found),
                  peat_detector_acceptance_name(e[i].verdict));
    cr_expect_geq(s.right * 10, 9 * s.defects, "right class for %d of %d", s.right, s.defects);
    free(e);
}
