//! IO edge: search and fetch backends for research skills; results are untrusted context.
