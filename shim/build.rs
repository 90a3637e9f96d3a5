//! Enables the frame-pointer fast path of attribution only when this build really keeps
//! frame pointers (`.cargo/config.toml` asks for them; a RUSTFLAGS override may not), and
//! compiles the stdio wrappers (`csrc/stdio_tap.c`, see `src/hooks/stdio.rs`) with the
//! system C compiler (no crate dependency: the one a Rust build on Linux links with anyway).
use std::path::PathBuf;
use std::process::Command;

fn tool(kind: &str, default: &str) -> String {
    let target = std::env::var("TARGET")
        .unwrap_or_default()
        .replace('-', "_");
    for name in [
        format!("{kind}_{target}"),
        format!("TARGET_{kind}"),
        kind.to_string(),
    ] {
        println!("cargo::rerun-if-env-changed={name}");
        if let Ok(v) = std::env::var(&name) {
            if !v.trim().is_empty() {
                return v;
            }
        }
    }
    default.to_string()
}

fn run(cmd: &mut Command) {
    let shown = format!("{cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{shown} failed with {s}"),
        Err(e) => {
            panic!("cannot run {shown}: {e} (a C compiler and `ar` are needed to build the shim)")
        }
    }
}

fn compile_stdio_wrappers() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let obj = out.join("stdio_tap.o");
    let lib = out.join("libvlstdio.a");
    println!("cargo::rerun-if-changed=csrc/stdio_tap.c");
    run(Command::new(tool("CC", "cc"))
        .args([
            "-c",
            "-O2",
            "-fPIC",
            "-fvisibility=hidden",
            "-fno-omit-frame-pointer",
            "-D_FORTIFY_SOURCE=0",
            "-Wall",
            "-Wextra",
            "-o",
        ])
        .arg(&obj)
        .arg("csrc/stdio_tap.c"));
    let _ = std::fs::remove_file(&lib);
    run(Command::new(tool("AR", "ar"))
        .arg("crs")
        .arg(&lib)
        .arg(&obj));
    println!("cargo::rustc-link-search=native={}", out.display());
    println!("cargo::rustc-link-lib=static=vlstdio");
}

fn main() {
    compile_stdio_wrappers();
    println!("cargo::rustc-check-cfg=cfg(vl_frame_pointers)");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let kept = flags.split('\x1f').collect::<Vec<_>>().windows(2).any(|w| {
        w[0] == "-C"
            && matches!(
                w[1],
                "force-frame-pointers=yes"
                    | "force-frame-pointers=on"
                    | "force-frame-pointers=true"
                    | "force-frame-pointers"
            )
    }) || flags.split('\x1f').any(|f| {
        matches!(
            f,
            "-Cforce-frame-pointers=yes"
                | "-Cforce-frame-pointers=on"
                | "-Cforce-frame-pointers=true"
        )
    });
    if kept {
        println!("cargo::rustc-cfg=vl_frame_pointers");
    }
}
