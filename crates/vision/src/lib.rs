//! Pure logic: frame classification, element proposals, stable ids, Set-of-Marks rendering, template matching, the Ocr trait.
