//! stdio output reaches the tap: `fprintf(stderr, "... Load weight end ...")` from a C or C++
//! program marks the stage as the same line written with `write` would.
//!
//! glibc's stdio writes through its internal `__write`, which the interposed `write` never
//! sees, so the stdio output functions themselves are interposed. The printf family is
//! variadic, which stable Rust cannot define, so the wrappers are a small C file
//! (`shim/csrc/stdio_tap.c`, compiled by `build.rs` with the system C compiler, no crate
//! dependency): each calls the real function with the caller's exact arguments and, after it
//! returned, hands the bytes it put into the stream to [`crate::hooks::tap::observe`]. The C
//! symbols stay local to the library; the exported names below are naked one-instruction
//! trampolines that jump to them, so every register and the stack (variadic arguments, `al`)
//! reach the C function exactly as the caller set them. Results and `errno` are unchanged.
//!
//! C++ iostreams need nothing more: synchronised with stdio (the default) libstdc++ writes
//! through `fwrite`/`putc`, and unsynchronised through `write`/`writev`, all interposed.
//!
//! The bytes are reported after the real call returned, so a locking stdio function has
//! released its stream; an `_unlocked` one is called with the stream locked by the caller,
//! and a line that enters a stage then samples free memory (a driver call) while the caller
//! still holds that lock, as a `write` under any lock of the program's own would.

use std::ffi::c_int;

extern "C" {
    fn vl_stdio_register(
        observe: extern "C" fn(c_int, *const u8, usize),
        wanted: extern "C" fn() -> c_int,
        needs: extern "C" fn(c_int, *const u8, usize) -> c_int,
    );
    fn vl_stdio_resolve();
}

extern "C" fn observe(fd: c_int, bytes: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    if bytes.is_null() {
        let _ = std::panic::catch_unwind(|| super::tap::unseen(fd));
        return;
    }
    // SAFETY: the C side passes the `len` bytes the real stdio call just took from the
    // caller (or its own formatting buffer).
    let b = unsafe { std::slice::from_raw_parts(bytes, len) };
    let _ = std::panic::catch_unwind(|| super::tap::observe(fd, b));
}

extern "C" fn needs(fd: c_int, bytes: *const u8, len: usize) -> c_int {
    if bytes.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: the C side passes `len` bytes of the stream's buffer, which it holds locked and
    // which the real call just wrote; they are only read, here and now.
    let b = unsafe { std::slice::from_raw_parts(bytes, len) };
    std::panic::catch_unwind(|| super::tap::needs(fd, b)).unwrap_or(true) as c_int
}

extern "C" fn wanted() -> c_int {
    // Inside a signal handler nothing is formatted again or copied (the tap would not look).
    std::panic::catch_unwind(|| super::tap::wanted() && !super::signals::in_handler())
        .unwrap_or(false) as c_int
}

/// Connects the C wrappers to the tap (when the library is loaded).
pub fn init_at_load() {
    // SAFETY: registering two functions that live as long as the library.
    unsafe { vl_stdio_register(observe, wanted, needs) };
    if !crate::config::disabled_now() {
        // SAFETY: resolves the real functions with dlsym(RTLD_NEXT), once.
        unsafe { vl_stdio_resolve() };
    }
}

macro_rules! trampolines {
    ($($name:ident => $target:ident),* $(,)?) => {
        extern "C" {
            $(fn $target();)*
        }
        $(
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!("jmp {t}", t = sym $target)
            }
            #[cfg(target_arch = "aarch64")]
            #[unsafe(naked)]
            #[no_mangle]
            pub unsafe extern "C" fn $name() {
                core::arch::naked_asm!("b {t}", t = sym $target)
            }
        )*
        /// The libc stdio functions vramledger exports in place of libc's.
        pub const HOOKED: &[&str] = &[$(stringify!($name)),*];
    };
}

trampolines! {
    printf => vl_printf,
    fprintf => vl_fprintf,
    vprintf => vl_vprintf,
    vfprintf => vl_vfprintf,
    dprintf => vl_dprintf,
    vdprintf => vl_vdprintf,
    __printf_chk => vl___printf_chk,
    __fprintf_chk => vl___fprintf_chk,
    __vprintf_chk => vl___vprintf_chk,
    __vfprintf_chk => vl___vfprintf_chk,
    __dprintf_chk => vl___dprintf_chk,
    __vdprintf_chk => vl___vdprintf_chk,
    puts => vl_puts,
    fputs => vl_fputs,
    fputs_unlocked => vl_fputs_unlocked,
    fwrite => vl_fwrite,
    fwrite_unlocked => vl_fwrite_unlocked,
    fputc => vl_fputc,
    putc => vl_putc,
    _IO_putc => vl__IO_putc,
    putchar => vl_putchar,
    fputc_unlocked => vl_fputc_unlocked,
    putc_unlocked => vl_putc_unlocked,
    putchar_unlocked => vl_putchar_unlocked,
}

/// True for the name of a stdio function vramledger exports.
pub fn is_hooked(name: &[u8]) -> bool {
    HOOKED.iter().any(|h| h.as_bytes() == name)
}
