#include <cmath>
#include <cstdio>
#include <iostream>

int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    const double pi = std::acos(-1.0);
    long long n = 0;
    std::cin >> n;
    for (long long i = 0; i < n; i++) {
        double r;
        std::cin >> r;
        std::printf("%.9f\n", pi * r * r);
    }
    return 0;
}
