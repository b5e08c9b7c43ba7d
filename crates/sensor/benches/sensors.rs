//! Benchmarks of the sensor evaluator (filled in below).
fn main() {}
