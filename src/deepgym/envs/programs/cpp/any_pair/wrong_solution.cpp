#include <cstdint>
#include <iostream>
#include <unordered_map>
#include <vector>

// Wrong: every value goes in the map first, and the lookup never checks that the index it
// finds differs from i, so a value that is half the target pairs with itself ("1 1").
int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    int n = 0;
    std::int64_t target = 0;
    std::cin >> n >> target;
    std::vector<std::int64_t> a(n);
    std::unordered_map<std::int64_t, int> where;
    for (int i = 0; i < n; i++) {
        std::cin >> a[i];
        where[a[i]] = i;
    }
    for (int i = 0; i < n; i++) {
        auto it = where.find(target - a[i]);
        if (it != where.end()) {
            std::cout << i + 1 << ' ' << it->second + 1 << '\n';
            return 0;
        }
    }
    std::cout << -1 << '\n';
    return 0;
}
