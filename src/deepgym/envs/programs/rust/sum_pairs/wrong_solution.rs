use std::io::{self, Read};

// Wrong: i32 cannot hold values past 2^31 (the parse panics).
fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let mut words = input.split_whitespace();
    let n: usize = words.next().map_or(0, |w| w.parse().unwrap());
    for _ in 0..n {
        let a: i32 = words.next().unwrap().parse().unwrap();
        let b: i32 = words.next().unwrap().parse().unwrap();
        println!("{}", a + b);
    }
}
