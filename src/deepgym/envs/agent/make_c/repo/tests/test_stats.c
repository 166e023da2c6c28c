#include <stdio.h>
#include "../src/stats.h"

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

int main(void) {
    int xs[] = {3, 1, 4, 1, 5};
    check(stats_sum(xs, 5) == 14, "sum");
    check(stats_max(xs, 5) == 5, "max");
    check(stats_mean(xs, 5) == 2.8, "mean");
    if (failures == 0) {
        printf("all tests passed\n");
    }
    return failures != 0;
}
