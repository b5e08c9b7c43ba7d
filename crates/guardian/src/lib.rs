//! IO edge: the guardian process and the shared-memory layout it reads (held set, heartbeat, halt flag).
