#include <cmath>
#include <iostream>

// Wrong: std::cout prints six significant digits by default (no std::fixed, no precision),
// so 314.159265... comes out as 314.159.
int main() {
    const double pi = std::acos(-1.0);
    int n = 0;
    std::cin >> n;
    for (int i = 0; i < n; i++) {
        double r;
        std::cin >> r;
        std::cout << pi * r * r << '\n';
    }
    return 0;
}
