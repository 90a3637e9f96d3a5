//! Give the fake driver the real driver's soname, and bind its own symbols locally so that
//! `cuGetProcAddress` hands out the library's own addresses even when an interposer exports
//! the same names (libcuda.so.1 behaves that way).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
    println!("cargo:rerun-if-changed=build.rs");
}
