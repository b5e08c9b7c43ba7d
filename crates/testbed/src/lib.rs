//! Test support: Xvfb/Xephyr harness that launches the practice game and cleans up every process it started.
