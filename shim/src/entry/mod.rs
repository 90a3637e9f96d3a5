//! Every way a program can reach a hooked function, turned into a call of the hook:
//! exported symbols (the hooks themselves, under their versioned names), the `dlsym`
//! override, and the `cuGetProcAddress` router. Knows names, versions and flags;
//! knows nothing of ledgers. The table of real functions they fill is `crate::real`.

pub mod dlsym;
pub mod exports;
pub mod procaddr;
