//! Python-exact float helpers.
//!
//! SGLang and vLLM do their sizing in Python floats; to agree with them bit for bit this module
//! reproduces the Python operators they use: `round(x, n)` (correctly rounded on the exact binary
//! value, ties to even), `int(x)` (truncation toward zero), float `//` (CPython's `float_floor_div`,
//! which is *not* `floor(a / b)`), integer `//` (floor), `math.ceil`, `repr(x)` and `f"{x:.Nf}"`,
//! plus the float32 round trip of `torch.distributed.all_reduce` on a `float32` tensor.
//! It owns no engine knowledge.

/// 2^30 as a float: SGLang's `1 << 30` and vLLM's `GiB_bytes` (every "GB" they print is GiB).
pub const GIB: f64 = 1_073_741_824.0;

/// 2^30 as an integer.
pub const GIB_BYTES: u64 = 1 << 30;

/// Python `round(x, ndigits)` for a float and `ndigits >= 0`: the exact binary value rounded to
/// `ndigits` decimals (ties to even), read back as the nearest float. NaN and infinities pass
/// through, as in Python.
pub fn py_round(x: f64, ndigits: u32) -> f64 {
    if !x.is_finite() {
        return x;
    }
    // Rust's fixed-precision formatting is exact on the binary value and rounds ties to even,
    // which is what CPython's `_Py_dg_dtoa(mode 3)` does; parsing is correctly rounded too.
    let text = format!("{:.*}", ndigits as usize, x);
    text.parse::<f64>().unwrap_or(x)
}

/// Python `round(x)` (no `ndigits`): ties to even, returned as a float holding the integer.
pub fn py_round_int(x: f64) -> f64 {
    x.round_ties_even()
}

/// Python `int(x)` for a float: truncation toward zero. Python has no bound; here values beyond
/// `i64` saturate and NaN gives 0 (Python would raise), which no sizing input reaches.
pub fn py_int(x: f64) -> i64 {
    x.trunc() as i64
}

/// Python float floor division `a // b` (CPython `_float_div_mod`): `fmod`, an exact-multiple
/// division, a sign fix and a snap to the nearest integer. It can differ from `(a / b).floor()`
/// by one when `a / b` rounds up to an integer. `b == 0` gives NaN (Python raises).
pub fn py_floordiv(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return f64::NAN;
    }
    let mut rem = a % b;
    let mut div = (a - rem) / b;
    if rem != 0.0 {
        if (b < 0.0) != (rem < 0.0) {
            rem += b;
            div -= 1.0;
        }
    } else {
        rem = 0.0f64.copysign(b);
    }
    let _ = rem;
    if div != 0.0 {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    } else {
        0.0f64.copysign(a / b)
    }
}

/// Python integer floor division `a // b` (rounds toward negative infinity). `b == 0` gives 0
/// (Python raises); callers never divide by zero.
pub fn py_floordiv_int(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Python `math.ceil(x)` as an integer.
pub fn py_ceil(x: f64) -> i64 {
    x.ceil() as i64
}

/// Python `float(x)` of a `float32` tensor element: what `torch.tensor(v, dtype=torch.float32)`
/// followed by `.item()` returns (round to nearest, ties to even).
pub fn to_float32(x: f64) -> f64 {
    x as f32 as f64
}

/// Python `f"{x:.{decimals}f}"` (and `"%.Nf" % x`): exact rounding of the binary value, ties to even.
pub fn py_fixed(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    format!("{:.*}", decimals, x)
}

/// Python `repr(x)` / `str(x)` / `f"{x}"` for a float: the shortest digits that read back to `x`,
/// written fixed when the decimal point position is in (-4, 16], else as `1e-05` / `1.5e+16`.
pub fn py_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{:e}", x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1; // position of the decimal point relative to the first digit
    let n = digits.len() as i32;
    let body = if decpt > -4 && decpt <= 16 {
        if decpt <= 0 {
            format!("0.{}{}", "0".repeat((-decpt) as usize), digits)
        } else if decpt >= n {
            format!("{}{}.0", digits, "0".repeat((decpt - n) as usize))
        } else {
            format!(
                "{}.{}",
                &digits[..decpt as usize],
                &digits[decpt as usize..]
            )
        }
    } else {
        let rest = if n > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{}{}e{}{:02}", &digits[..1], rest, esign, exp.abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_is_half_even_on_the_binary_value() {
        // 0.125 is exact in binary, a true tie: Python round(0.125, 2) == 0.12 (even).
        assert_eq!(py_round(0.125, 2), 0.12);
        // 0.375 -> 0.38 (even digit 8).
        assert_eq!(py_round(0.375, 2), 0.38);
        // 2.675 is stored as 2.67499999999999982236431605997495353221893310546875 -> 2.67.
        assert_eq!(py_round(2.675, 2), 2.67);
        // (81559 - 13440) / 81559 = 0.835212...; round(.., 3) = 0.835 (SGLang's H100 default).
        assert_eq!(py_round((81559.0 - 13440.0) / 81559.0, 3), 0.835);
        assert_eq!(py_round_int(2.5), 2.0);
        assert_eq!(py_round_int(3.5), 4.0);
        assert_eq!(py_round_int(-0.5), -0.0);
    }

    #[test]
    fn int_truncates_toward_zero() {
        assert_eq!(py_int(2.9), 2);
        assert_eq!(py_int(-2.9), -2);
        assert_eq!(py_int(-0.5), 0);
    }

    #[test]
    fn float_floordiv_matches_cpython() {
        // 7.5 // 2 = 3.0; -7.5 // 2 = -4.0 (floor, not trunc).
        assert_eq!(py_floordiv(7.5, 2.0), 3.0);
        assert_eq!(py_floordiv(-7.5, 2.0), -4.0);
        // Python: 1.0 // 0.1 == 9.0 although 1.0 / 0.1 == 10.0 (0.1 is slightly above 1/10).
        assert_eq!(1.0f64 / 0.1, 10.0);
        assert_eq!(py_floordiv(1.0, 0.1), 9.0);
        // A negative KV remainder: -3.949e10 // 70272 -> -561981 (DeepSeek-R1 log, see tokens.rs).
        assert_eq!(py_floordiv(-561_980.5 * 70272.0, 70272.0), -561_981.0);
    }

    #[test]
    fn int_floordiv_floors() {
        assert_eq!(py_floordiv_int(7, 2), 3);
        assert_eq!(py_floordiv_int(-7, 2), -4);
        assert_eq!(py_floordiv_int(7, -2), -4);
        assert_eq!(py_floordiv_int(-8, 2), -4);
    }

    #[test]
    fn repr_matches_python() {
        assert_eq!(py_repr(0.835), "0.835");
        assert_eq!(py_repr(0.8260405859375), "0.8260405859375");
        assert_eq!(py_repr(1.0), "1.0");
        assert_eq!(py_repr(1e-5), "1e-05");
        assert_eq!(py_repr(0.0001), "0.0001");
        assert_eq!(py_repr(1e16), "1e+16");
        assert_eq!(py_repr(1234567890123456.0), "1234567890123456.0");
        assert_eq!(py_repr(-2.5e-7), "-2.5e-07");
        assert_eq!(py_repr(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn float32_round_trip() {
        // 80 GiB + 1 byte is not a float32: the all-reduce MIN snaps it to a multiple of 8192.
        let x = (80u64 * GIB_BYTES + 1) as f64;
        assert_eq!(to_float32(x), (80u64 * GIB_BYTES) as f64);
        assert_eq!(to_float32(x + 8191.0), (80u64 * GIB_BYTES + 8192) as f64);
    }

    /// 2,512 vectors generated with CPython 3 (`round`, `f"{x:.Nf}"`, `repr`) and stored in
    /// `tests/sizing_pyfloat_vectors.txt`; a mismatch prints the first failing value.
    #[test]
    fn agrees_with_cpython_vectors() {
        let text = include_str!("../../tests/sizing_pyfloat_vectors.txt");
        let mut count = 0;
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let x = parse_hex_float(f[0]);
            let n: u32 = f[1].parse().unwrap();
            let want = parse_hex_float(f[2]);
            let got = if n == 0 {
                py_round_int(x)
            } else {
                py_round(x, n)
            };
            assert_eq!(got.to_bits(), want.to_bits(), "round({x:?}, {n})");
            assert_eq!(py_fixed(x, n as usize), f[3], "f'{{x:.{n}f}}' of {x:?}");
            assert_eq!(py_repr(x), f[4], "repr of {x:?}");
            count += 1;
        }
        assert!(count > 2_500);
    }

    /// Reads Python's `float.hex()` form of a normal float or zero, e.g. `-0x1.e3a5e353f7ceep+4`.
    fn parse_hex_float(s: &str) -> f64 {
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s),
        };
        let s = s.strip_prefix("0x").unwrap();
        let (mant, exp) = s.split_once('p').unwrap();
        let (lead, frac) = mant.split_once('.').unwrap_or((mant, ""));
        let magnitude = if lead == "0" {
            0.0
        } else {
            let mut frac_bits: u64 = 0;
            for c in format!("{frac:0<13}").chars() {
                frac_bits = (frac_bits << 4) | c.to_digit(16).unwrap() as u64;
            }
            let exp: i64 = exp.parse().unwrap();
            f64::from_bits((((exp + 1023) as u64) << 52) | frac_bits)
        };
        if neg {
            -magnitude
        } else {
            magnitude
        }
    }
}
