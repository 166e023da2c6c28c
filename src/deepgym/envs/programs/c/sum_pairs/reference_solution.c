#include <stdio.h>

int main(void) {
    long long n, a, b;
    if (scanf("%lld", &n) != 1) return 0;
    for (long long i = 0; i < n; i++) {
        if (scanf("%lld %lld", &a, &b) != 2) return 1;
        printf("%lld\n", a + b);
    }
    return 0;
}
