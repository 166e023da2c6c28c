#ifndef STATS_H
#define STATS_H

long stats_sum(const int *xs, int n);
int stats_max(const int *xs, int n);
double stats_mean(const int *xs, int n);

#endif
