//! Enables the frame-pointer fast path of attribution only when this build really keeps
//! frame pointers (`.cargo/config.toml` asks for them; a RUSTFLAGS override may not).
fn main() {
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
