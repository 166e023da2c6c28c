#include "stats.h"

long stats_sum(const int *xs, int n) {
    long total = 0;
    for (int i = 1; i < n; i++) {
        total += xs[i];
    }
    return total;
}

int stats_max(const int *xs, int n) {
    int best = 0;
    for (int i = 0; i < n; i++) {
        if (xs[i] > best) {
            best = xs[i];
        }
    }
    return best;
}

double stats_mean(const int *xs, int n) {
    return (double)stats_sum(xs, n) / n;
}
