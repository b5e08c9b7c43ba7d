//! Fuzz target: arbitrary bytes as a sensor file through lexer, parser, checker, compiler and evaluator.
//! Run: `cargo +nightly fuzz run parse_check_eval` in fuzz/ (crashes land in fuzz/artifacts/; copy each
//! into the regression list in crates/logic/sensor/src/tests.rs).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data) {
        gamepilot_sensor::fuzzing::exercise(src);
    }
});
