use std::fmt::Write as _;
use std::io::{self, Read, Write};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).expect("stdin is text");
    let mut words = input.split_ascii_whitespace();
    let n: usize = words.next().map_or(0, |w| w.parse().expect("n is a count"));
    let mut out = String::new();
    for _ in 0..n {
        let a: i64 = words.next().expect("a").parse().expect("a is an i64");
        let b: i64 = words.next().expect("b").parse().expect("b is an i64");
        writeln!(out, "{}", a + b).expect("writing to a String");
    }
    io::stdout().write_all(out.as_bytes()).expect("stdout");
}
