#include <stdio.h>

/* Wrong: 32-bit ints overflow on values past 2^31. */
int main(void) {
    int n, a, b;
    if (scanf("%d", &n) != 1) return 0;
    for (int i = 0; i < n; i++) {
        if (scanf("%d %d", &a, &b) != 2) return 0;
        printf("%d\n", a + b);
    }
    return 0;
}
