#include <stdio.h>
#include "stats.h"

/* Prints the values; the verifier compares them (nothing printed here is a verdict). */
int main(void) {
    int a[] = {-7, -2, -9};
    int b[] = {10};
    int c[] = {2, 2, 2, 8};
    printf("%ld\n", stats_sum(a, 3));
    printf("%d\n", stats_max(a, 3));
    printf("%ld %d\n", stats_sum(b, 1), stats_max(b, 1));
    printf("%.6f\n", stats_mean(c, 4));
    return 0;
}
