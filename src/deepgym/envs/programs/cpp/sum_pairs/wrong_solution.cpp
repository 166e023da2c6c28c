#include <iostream>

// Wrong: 32-bit ints cannot hold values past 2^31.
int main() {
    std::ios::sync_with_stdio(false);
    int n = 0;
    std::cin >> n;
    for (int i = 0; i < n; i++) {
        int a, b;
        std::cin >> a >> b;
        std::cout << a + b << '\n';
    }
    return 0;
}
