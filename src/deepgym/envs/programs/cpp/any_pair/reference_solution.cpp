#include <cstdint>
#include <iostream>
#include <unordered_map>
#include <vector>

// For each j, look for target - a_j among the values before it: the pair with the smallest j.
int main() {
    std::ios::sync_with_stdio(false);
    std::cin.tie(nullptr);
    int n = 0;
    std::int64_t target = 0;
    std::cin >> n >> target;
    std::vector<std::int64_t> a(n);
    for (auto& v : a) std::cin >> v;
    std::unordered_map<std::int64_t, int> first;
    first.reserve(2 * static_cast<std::size_t>(n));
    for (int j = 0; j < n; j++) {
        auto it = first.find(target - a[j]);
        if (it != first.end()) {
            std::cout << it->second + 1 << ' ' << j + 1 << '\n';
            return 0;
        }
        first.emplace(a[j], j);
    }
    std::cout << -1 << '\n';
    return 0;
}
