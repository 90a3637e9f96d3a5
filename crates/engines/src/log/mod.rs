//! Log-line grammar (SGLang, vLLM): a line in, a stage boundary and its numbers out.
