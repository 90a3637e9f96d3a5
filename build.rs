//! Builds libvramledger.so (shim/) with the same cargo, profile and compiler flags into OUT_DIR,
//! so that the CLI carries a copy of it (`src/launch/libpath.rs` writes it out on first use). This is
//! what makes `cargo install --path .` give a `vramledger run` that needs nothing beside it.
//!
//! `VRAMLEDGER_EMBED_SHIM=0` builds the CLI without the copy (the Python wheel ships the
//! library as a file beside the CLI instead). Without shim/ in the source (a packaged crate),
//! the CLI is built without it too and `run` needs `--lib` or `VRAMLEDGER_LIB`.
//!
//! The nested cargo gets its own target directory (the outer build holds the lock of its own)
//! and no workspace wrapper (`cargo clippy` sets one: the shim is linted by its own run).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(vl_embedded_shim)");
    println!("cargo::rerun-if-env-changed=VRAMLEDGER_EMBED_SHIM");
    let root =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    for p in [
        "shim",
        "crates/format",
        "crates/engines",
        "Cargo.lock",
        ".cargo/config.toml",
    ] {
        if root.join(p).exists() {
            println!("cargo::rerun-if-changed={p}");
        }
    }
    if env::var("VRAMLEDGER_EMBED_SHIM").is_ok_and(|v| v == "0") {
        return;
    }
    if !root.join("shim/Cargo.toml").is_file() {
        println!(
            "cargo::warning=shim/ is not in this source: this vramledger carries no libvramledger.so (`run` needs --lib PATH or VRAMLEDGER_LIB)"
        );
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lib = build_shim(&root, &out);
    let bytes =
        std::fs::read(&lib).unwrap_or_else(|e| panic!("cannot read {}: {e}", lib.display()));
    println!("cargo::rustc-cfg=vl_embedded_shim");
    println!(
        "cargo::rustc-env=VRAMLEDGER_EMBEDDED_SHIM={}",
        lib.display()
    );
    println!(
        "cargo::rustc-env=VRAMLEDGER_EMBEDDED_SHIM_ID={}",
        content_id(&bytes)
    );
}

/// Runs `cargo build -p vramledger-shim` for this build's target and profile; returns the
/// library's path.
fn build_shim(root: &Path, out: &Path) -> PathBuf {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target_dir = out.join("shim-target");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["-p", "vramledger-shim", "--target", &target])
        .arg("--target-dir")
        .arg(&target_dir);
    if release {
        cmd.arg("--release");
    }
    // The outer cargo's flags (CARGO_ENCODED_RUSTFLAGS) are passed on as they are; these are
    // not: a wrapper for the outer workspace, the outer target directory.
    for var in [
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build shim/: {e}"));
    assert!(
        status.success(),
        "building shim/ (libvramledger.so) failed: {status}"
    );
    let profile_dir = if release { "release" } else { "debug" };
    let lib = target_dir
        .join(&target)
        .join(profile_dir)
        .join("libvramledger.so");
    assert!(
        lib.is_file(),
        "the shim build produced no {}",
        lib.display()
    );
    lib
}

/// A name for the library's content (FNV-1a over the bytes, two lanes, and the length): the
/// folder it is written to, so that two versions never share one.
fn content_id(bytes: &[u8]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for &x in bytes {
        a = (a ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ x as u64)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(5);
    }
    format!("{a:016x}{b:016x}-{}", bytes.len())
}
