//! Every `VRAMLEDGER_*` setting, read once from the environment on first use.
//!
//! Read with `getenv` (no Rust `std::env` lock, no allocation before it is needed).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// The settings.
#[derive(Debug)]
pub struct Config {
    /// Where journals go (`VRAMLEDGER_OUT`, default `./vramledger-out`); `Err` (why) when the
    /// variable names no folder this library can write to as given (it is not UTF-8: a
    /// lossy copy would name another folder).
    pub out_dir: Result<String, String>,
    /// Run id shared by every process of one `vramledger run` (`VRAMLEDGER_RUN_ID`), reduced
    /// to `[A-Za-z0-9._-]` (it is part of the journal's file name).
    pub run_id: String,
    /// Sample NVML at context creation and stage boundaries (`VRAMLEDGER_NVML`, default on).
    pub nvml: bool,
    /// Print what vramledger does on stderr (`VRAMLEDGER_DEBUG`).
    pub debug: bool,
    /// Recognise stages from the program's stdout/stderr lines (`VRAMLEDGER_TAP`, default on).
    pub tap: bool,
    /// A rule file for other engines' log lines (`VRAMLEDGER_RULES`).
    pub rules: Option<String>,
}

fn env(name: &CStr) -> Option<String> {
    env_with(name, |v| v.to_string_lossy().into_owned())
}

/// `f` of environment variable `name`'s value as it is (bytes, not yet text), if it is set.
fn env_with<R>(name: &CStr, f: impl FnOnce(&CStr) -> R) -> Option<R> {
    // SAFETY: getenv with a NUL-terminated name; the result is read at once, by `f`.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    Some(f(unsafe { CStr::from_ptr(p) }))
}

fn truthy(v: Option<String>, default: bool) -> bool {
    match v.as_deref().map(str::trim) {
        None | Some("") => default,
        Some("0") | Some("false") | Some("no") | Some("off") => false,
        Some(_) => true,
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();
// 0: not read, 1: enabled, 2: disabled.
static DISABLED: &AtomicU8 = &crate::hot::HOT.disabled;

/// True when `VRAMLEDGER_DISABLE` asks for pure pass-through. Cheap after the first call.
pub fn disabled() -> bool {
    match DISABLED.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let off = truthy(env(c"VRAMLEDGER_DISABLE"), false);
            DISABLED.store(if off { 2 } else { 1 }, Ordering::Relaxed);
            off
        }
    }
}

/// `VRAMLEDGER_DISABLE` as the environment says now, without caching it (for the library's
/// load, when a program may still set its settings before its first CUDA call).
pub fn disabled_now() -> bool {
    truthy(env(c"VRAMLEDGER_DISABLE"), false)
}

/// The settings (read on first use).
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| Config {
        out_dir: out_dir(),
        run_id: name_part(
            &env(c"VRAMLEDGER_RUN_ID").unwrap_or_default(),
            vramledger_format::header::NO_RUN_ID,
        ),
        nvml: truthy(env(c"VRAMLEDGER_NVML"), true),
        debug: truthy(env(c"VRAMLEDGER_DEBUG"), false),
        tap: truthy(env(c"VRAMLEDGER_TAP"), true),
        rules: env(c"VRAMLEDGER_RULES").filter(|s| !s.is_empty()),
    })
}

/// `VRAMLEDGER_OUT`, as given (see [`Config::out_dir`]).
fn out_dir() -> Result<String, String> {
    match env_with(c"VRAMLEDGER_OUT", |v| v.to_str().map(str::to_string)) {
        None => Ok("vramledger-out".to_string()),
        Some(Ok(s)) if s.is_empty() => Ok("vramledger-out".to_string()),
        Some(Ok(s)) => Ok(s),
        Some(Err(_)) => {
            Err("VRAMLEDGER_OUT is not UTF-8 (a copy of it would name another folder)".into())
        }
    }
}

/// Longest run id or host name kept in a file name (NAME_MAX is 255 for the whole name).
const MAX_NAME_PART: usize = 64;

/// A name part reduced to `[A-Za-z0-9._-]`, never empty, never starting with a dot, at most
/// 64 bytes: a run id or a host name can become part of a file name and never leave its
/// folder (`../x`, `/`, control bytes).
pub fn name_part(s: &str, fallback: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME_PART)
        .collect();
    if out.starts_with('.') {
        out.replace_range(0..1, "_");
    }
    if out.is_empty() {
        out = fallback.to_string();
    }
    out
}

/// Reads any environment variable (for the journal header).
pub fn var(name: &CStr) -> Option<String> {
    env(name)
}
