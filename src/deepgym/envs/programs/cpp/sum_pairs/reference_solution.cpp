#include <cstdint>
#include <iostream>

int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    long long n = 0;
    std::cin >> n;
    for (long long i = 0; i < n; i++) {
        std::int64_t a, b;
        std::cin >> a >> b;
        std::cout << a + b << '\n';
    }
    return 0;
}
