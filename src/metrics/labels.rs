//! Labels read from a journal header: a short command name, the model name, the GPU index and
//! UUID that other exporters use, and a command line with secrets blanked for storage.
//!
//! Everything here is a pure function of header text, so it is the same for `metrics`,
//! `serve`, `top` and `export`.

/// The longest label value derived from a command line (longer ones are cut).
const MAX_LABEL: usize = 64;

fn argv(cmdline: &str) -> Vec<&str> {
    cmdline.split('\0').filter(|a| !a.is_empty()).collect()
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_LABEL) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

fn is_python(exe: &str) -> bool {
    let b = base(exe);
    b.starts_with("python") || b == "pypy" || b.starts_with("pypy3")
}

/// A short, low-cardinality name for the program: `sglang.launch_server` for
/// `python -m sglang.launch_server …`, `vllm_offline.py` for `python3 x/vllm_offline.py`,
/// `python -c` for an inline program (multiprocessing's spawned workers), else the
/// executable's file name. Arguments never appear (they may hold prompts or keys).
pub fn command(cmdline: &str) -> String {
    let args = argv(cmdline);
    let Some(first) = args.first() else {
        return String::new();
    };
    if !is_python(first) {
        return cut(base(first));
    }
    let mut i = 1;
    while i < args.len() {
        let a = args[i];
        match a {
            "-m" => return cut(args.get(i + 1).copied().unwrap_or("python -m")),
            "-c" => return format!("{} -c", cut(base(first))),
            _ if a.starts_with("-m") && a.len() > 2 => return cut(&a[2..]),
            // Interpreter switches that take a value.
            "-W" | "-X" | "-Q" => i += 2,
            _ if a.starts_with('-') => i += 1,
            _ => return cut(base(a)),
        }
    }
    cut(base(first))
}

/// The value of `--flag VALUE` or `--flag=VALUE` in `args` (first occurrence).
fn flag<'a>(args: &[&'a str], names: &[&str]) -> Option<&'a str> {
    for (i, a) in args.iter().enumerate() {
        for n in names {
            if *a == *n {
                if let Some(v) = args.get(i + 1).filter(|v| !v.starts_with("--")) {
                    return Some(v);
                }
            } else if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
    }
    None
}

/// The model name an engine labels its own metrics with, from its launch command line:
/// `--served-model-name` (vLLM and SGLang; the first of several), else `--model-path` /
/// `--model`, else `vllm serve MODEL`'s positional argument. SGLang and vLLM both default
/// their `model_name` label to the model path, so the same value lets a query join them.
pub fn model_name(cmdline: &str) -> Option<String> {
    let args = argv(cmdline);
    let served = flag(&args, &["--served-model-name"]);
    let model = flag(&args, &["--model-path", "--model"]);
    let positional = args
        .windows(3)
        .find(|w| base(w[0]) == "vllm" && w[1] == "serve" && !w[2].starts_with('-'))
        .map(|w| w[2]);
    served
        .or(model)
        .or(positional)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The NVML index (`gpu`, as dcgm-exporter labels it) and the UUID of CUDA ordinal `device`,
/// from the process's `CUDA_VISIBLE_DEVICES` as its header recorded it.
///
/// - unset or empty: CUDA ordinal `n` is GPU `n` (exact with `CUDA_DEVICE_ORDER=PCI_BUS_ID`;
///   CUDA's default order, fastest first, agrees on machines of one GPU model);
/// - a list of indices: entry `n`;
/// - a list of UUIDs (`GPU-…`): entry `n` is the UUID (a complete one only: CUDA also takes
///   unique prefixes, which name no series) and the index is unknown;
/// - CUDA reads the list up to its first invalid entry, and so does this. MIG instances
///   (`MIG-…`) give neither.
pub fn gpu_of(visible: Option<&str>, device: i32) -> (Option<String>, Option<String>) {
    if device < 0 {
        return (None, None);
    }
    let visible = visible.map(str::trim).unwrap_or("");
    if visible.is_empty() {
        return (Some(device.to_string()), None);
    }
    let mut entries = Vec::new();
    for raw in visible.split(',') {
        let e = raw.trim();
        let valid = e.parse::<u32>().is_ok() || e.starts_with("GPU-") || e.starts_with("MIG-");
        if !valid {
            break;
        }
        entries.push(e);
    }
    let Some(e) = entries.get(device as usize) else {
        return (None, None);
    };
    if let Ok(i) = e.parse::<u32>() {
        return (Some(i.to_string()), None);
    }
    // GPU-8-4-4-4-12 hex digits.
    let uuid = e.strip_prefix("GPU-").filter(|u| {
        u.len() == 36
            && u.char_indices().all(|(i, c)| {
                matches!(i, 8 | 13 | 18 | 23) == (c == '-') && (c == '-' || c.is_ascii_hexdigit())
            })
    });
    (None, uuid.map(|_| e.to_string()))
}

/// Words in a flag name that mark its value as a secret.
const SECRET_WORDS: &[&str] = &[
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "auth",
    "credential",
];

fn is_secret_flag(flag: &str) -> bool {
    let f = flag.trim_start_matches('-').to_ascii_lowercase();
    flag.starts_with('-') && SECRET_WORDS.iter().any(|w| f.contains(w))
}

/// The command line (arguments joined by spaces) with the value of every flag whose name
/// says key, token, secret, password or auth replaced by `***`: what may be stored.
pub fn redacted_cmdline(cmdline: &str) -> String {
    let args = argv(cmdline);
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next && !a.starts_with('-') {
            out.push("***".into());
            hide_next = false;
            continue;
        }
        hide_next = false;
        match a.split_once('=') {
            Some((name, _)) if is_secret_flag(name) => out.push(format!("{name}=***")),
            None if is_secret_flag(a) => {
                out.push(a.to_string());
                hide_next = true;
            }
            _ => out.push(a.to_string()),
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_short_and_carry_no_arguments() {
        assert_eq!(
            command("/usr/bin/python3\0-m\0sglang.launch_server\0--model-path\0/m"),
            "sglang.launch_server"
        );
        assert_eq!(
            command("python3\0-u\0examples/engines/vllm_offline.py\0--x"),
            "vllm_offline.py"
        );
        assert_eq!(
            command("/opt/v/bin/python3\0-B\0-c\0from multiprocessing.spawn import spawn_main"),
            "python3 -c"
        );
        assert_eq!(command("/usr/local/bin/vllm\0serve\0meta/Llama"), "vllm");
        assert_eq!(
            command("python\0-W\0ignore\0-mtorch.distributed.run"),
            "torch.distributed.run"
        );
        assert_eq!(command(""), "");
        assert_eq!(command(&"x".repeat(300)).len(), MAX_LABEL);
    }

    #[test]
    fn model_names_as_the_engines_label_them() {
        let sg =
            "python\0-m\0sglang.launch_server\0--model-path\0meta-llama/Llama-3.1-8B\0--tp\x002";
        assert_eq!(model_name(sg).as_deref(), Some("meta-llama/Llama-3.1-8B"));
        let served =
            "python\0-m\0sglang.launch_server\0--model-path=/m\0--served-model-name\0llama";
        assert_eq!(model_name(served).as_deref(), Some("llama"));
        assert_eq!(
            model_name("vllm\0serve\0Qwen/Qwen2.5-1.5B\0--tp\x002").as_deref(),
            Some("Qwen/Qwen2.5-1.5B")
        );
        assert_eq!(
            model_name("python\0-m\0vllm.entrypoints.openai.api_server\0--model\0m").as_deref(),
            Some("m")
        );
        assert_eq!(model_name("python\0train.py"), None);
        assert_eq!(model_name("python\0x.py\0--model"), None);
    }

    #[test]
    fn gpu_index_and_uuid_from_cuda_visible_devices() {
        assert_eq!(gpu_of(None, 1), (Some("1".into()), None));
        assert_eq!(gpu_of(Some(""), 0), (Some("0".into()), None));
        assert_eq!(gpu_of(Some("3,5"), 1), (Some("5".into()), None));
        assert_eq!(gpu_of(Some("3,5"), 2), (None, None));
        assert_eq!(
            gpu_of(Some("3,x,5"), 1),
            (None, None),
            "CUDA stops at an invalid entry"
        );
        let u = "GPU-5f3c2a1e-89ab-4cde-8f01-23456789abcd";
        assert_eq!(
            gpu_of(Some(&format!("{u},GPU-1234")), 0),
            (None, Some(u.into()))
        );
        assert_eq!(
            gpu_of(Some(&format!("{u},GPU-1234")), 1),
            (None, None),
            "a prefix names no series"
        );
        assert_eq!(gpu_of(Some("MIG-abc"), 0), (None, None));
        assert_eq!(gpu_of(None, -1), (None, None));
    }

    #[test]
    fn secrets_are_blanked() {
        let c = "python\0-m\0sglang.launch_server\0--api-key\0s3cr3t\0--hf-token=hf_abc\0--tp\x002\0--model-path\0m";
        let r = redacted_cmdline(c);
        assert_eq!(
            r,
            "python -m sglang.launch_server --api-key *** --hf-token=*** --tp 2 --model-path m"
        );
        assert!(!r.contains("s3cr3t") && !r.contains("hf_abc"));
        assert_eq!(
            redacted_cmdline("x\0--enable-auth\0--tp\x001"),
            "x --enable-auth --tp 1"
        );
    }
}
