//! IO edge: the session recording writer (write-only for the agent, INV-CTX-002).
