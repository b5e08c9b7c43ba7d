//! Fuzz target: arbitrary bytes as a frame, a region and preprocessing parameters through every OCR
//! preprocessing path (crop, polarity, contrast, scale, pad, binarise, box mapping, ink bounds, hashing,
//! resampling, DB post-processing, lone-glyph finder). Run: `fuzz/run.sh 300 ocr_prep`. A crash found here goes into
//! `crates/io/ocr/src/fuzzing.rs`'s test as a fixed input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gamepilot_ocr::fuzzing::exercise(data);
});
