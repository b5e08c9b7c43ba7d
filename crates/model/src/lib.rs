//! IO edge: OpenAI-compatible model-host client, llama-server launcher, weight verification, GPU-memory watch.
