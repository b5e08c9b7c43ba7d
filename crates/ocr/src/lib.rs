//! IO edge: tesseract-backed OCR with its worker thread and region cache.
