// Forgets that a remainder can be taken of a negative number: gcd_of(-4, 6) is -2 here.
long long gcd_of(long long a, long long b) {
    while (b != 0) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}
