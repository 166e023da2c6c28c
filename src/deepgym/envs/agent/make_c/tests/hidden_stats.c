#include <stdio.h>
#include "stats.h"

int main(void) {
    int a[] = {-7, -2, -9};
    int b[] = {10};
    int c[] = {2, 2, 2, 8};
    printf("%d\n", stats_sum(a, 3) == -18);
    printf("%d\n", stats_max(a, 3) == -2);
    printf("%d\n", stats_sum(b, 1) == 10 && stats_max(b, 1) == 10);
    printf("%d\n", stats_mean(c, 4) == 3.5);
    return 0;
}
