//! Pure logic: prompt assembly (eight blocks), note block, untrusted research blocks, compaction.
