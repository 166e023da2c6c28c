"""Hostile sources for the compile phase, by attack and language (``test_compile_attacks``).

Each is a wrong answer (it would print 0 where 3 is expected) plus one construct that makes
its compiler fail in a way of its own: deep nesting (an internal compiler error, a stack
overflow), a huge static array (the assembler's or linker's file-size limit, or memory), an
include of ``/dev/zero`` (where the language has includes: memory or time), a compile-time
bomb (the preprocessor's, constexpr's, type inference's, a macro's or constant folding's:
time or memory), and an include of the compiler's own stderr (a read that never ends: a wait
of its own).
"""

from __future__ import annotations

DEPTH = 200_000
"""How deep the nesting goes: gcc's parser dies of it in 0.2 s, rustc's and Go's overflow."""


def _nest(open_: str, close: str) -> str:
    return open_ * DEPTH + "0" + close * DEPTH


NESTING = {
    "c": "#include <stdio.h>\nint pad(void) { return " + _nest("(", ")") + "; }\n"
    'int main(void) { puts("0"); return 0; }\n',
    "cpp": "#include <cstdio>\nint pad() { return " + _nest("(", ")") + "; }\n"
    'int main() { std::puts("0"); }\n',
    "java": "public class Main {\n  static int pad() { return " + _nest("(", ")") + "; }\n"
    "  public static void main(String[] a) { System.out.println(0); }\n}\n",
    "js": "function pad() { return " + _nest("(", ")") + "; }\nconsole.log(0);\n",
    "rust": "fn pad() -> i32 { " + _nest("(", ")") + ' }\nfn main() { println!("0"); }\n',
    # Go's parser takes 200,000 parentheses in its stride; a chain of unary operators it does not
    "go": 'package main\n\nimport "fmt"\n\nfunc pad() int { return ' + "^" * DEPTH + "0 }\n"
    "func main() { fmt.Println(0) }\n",
}

HUGE_ARRAY = {
    "c": '#include <stdio.h>\nchar big[1 << 30] = {1};\nint main(void) { puts("0"); return 0; }\n',
    "cpp": '#include <cstdio>\nchar big[1 << 30] = {1};\nint main() { std::puts("0"); }\n',
    "rust": "static BIG: [u8; 1 << 30] = [1; 1 << 30];\n"
    'fn main() { println!("{}", BIG[7] - 1); }\n',
    "go": 'package main\n\nimport "fmt"\n\nvar big = [1 << 30]byte{1}\n\n'
    "func main() { fmt.Println(big[7]) }\n",
}

DEV_ZERO = {
    "c": '#include <stdio.h>\n#include "/dev/zero"\nint main(void) { puts("0"); return 0; }\n',
    "cpp": '#include <cstdio>\n#include "/dev/zero"\nint main() { std::puts("0"); }\n',
    "rust": 'static Z: &[u8] = include_bytes!("/dev/zero");\n'
    'fn main() { println!("{}", Z.len()); }\n',
}


BOMB = {
    # 2^39 tokens from 40 lines of the preprocessor
    "c": "#include <stdio.h>\n#define A0 +1\n"
    + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 40))
    + 'int v = 0 A39;\nint main(void) { puts("0"); return 0; }\n',
    # 800 constexpr loops, each under g++'s own limits, none of them memoized
    "cpp": "#include <cstdio>\n"
    "constexpr long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += i; return s; }\n"
    "template <int N> struct B { static constexpr long v = spin(200000 + N) + B<N - 1>::v; };\n"
    "template <> struct B<0> { static constexpr long v = 0; };\n"
    'int main() { std::printf("%ld\\n", B<800>::v - B<800>::v); }\n',
    # a generic call around a conditional of generic calls, 20 deep: exponential in javac
    "java": "public class Main {\n  static boolean c;\n  static <T> T id(T t) { return t; }\n"
    "  public static void main(String[] a) {\n    Object o = "
    + "id(c ? " * 20
    + "0"
    + " : id(0))" * 20
    + ";\n    System.out.println(0);\n  }\n}\n",
    # a macro that expands each call twice: 2^40 expansions
    "rust": "macro_rules! b { () => {}; (x $($t:tt)*) => { b!($($t)*); b!($($t)*); } }\n"
    "fn main() { b!(" + "x " * 40 + '); println!("0"); }\n',
    # a constant string doubled 39 times: 8 TiB to fold
    "go": 'package main\n\nimport "fmt"\n\nconst a0 = "xxxxxxxxxxxxxxxx"\n'
    + "".join(f"const a{i} = a{i - 1} + a{i - 1}\n" for i in range(1, 40))
    + "\nfunc main() { fmt.Println(len(a39) * 0) }\n",
}

OWN_STDERR = {
    # the compiler reads the pipe its own diagnostics go to: a read that never ends
    "c": '#include <stdio.h>\n#include "/proc/self/fd/2"\nint main(void) { puts("0"); }\n',
    "rust": 'static E: &[u8] = include_bytes!("/proc/self/fd/2");\n'
    'fn main() { println!("{}", E.len()); }\n',
}

ATTACKS = {
    "nesting": NESTING,
    "huge_array": HUGE_ARRAY,
    "dev_zero": DEV_ZERO,
    "bomb": BOMB,
    "own_stderr": OWN_STDERR,
}
"""Every attack, by name: its source in each language where it applies."""
