// The program an answer to cpp/gcd runs in: the answer defines gcd_of; this main reads the
// pairs of a test case and prints gcd_of of each, which is compared with the expected output.
#include <iostream>

// deepgym:answer

int main() {
    long long a, b;
    while (std::cin >> a >> b) std::cout << gcd_of(a, b) << "\n";
    return 0;
}
