//! Engine-specific knowledge (SGLang, vLLM): log-line grammar and sizing arithmetic.
//! Dependency-free so the shim can share the same grammar as the offline parser.
