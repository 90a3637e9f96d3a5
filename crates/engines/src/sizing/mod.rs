//! KV-cache sizing arithmetic (SGLang layouts, vLLM budgets).
