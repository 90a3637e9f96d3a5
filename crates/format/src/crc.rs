//! CRC-32 (IEEE 802.3, the zlib polynomial): `crc32fast`, which uses the CPU's carry-less
//! multiply where it has one. Format 1 checksums every frame; format 2 every 64 KiB block
//! (and its generic frames).

/// Continues a CRC over `bytes` (start with `0`).
#[inline]
pub fn update(crc: u32, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(bytes);
    h.finalize()
}

#[cfg(test)]
mod tests {
    /// The one-byte-at-a-time definition, to check the fast path against.
    fn reference(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    #[test]
    fn known_vector() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(super::update(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(
            super::update(super::update(0, b"1234"), b"56789"),
            0xCBF4_3926
        );
    }

    #[test]
    fn matches_the_bitwise_definition_at_every_length_and_split() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
        for len in (0..300).chain([511, 512, 513, 4096, 4999]) {
            let d = &data[..len];
            assert_eq!(super::update(0, d), reference(d), "len {len}");
            let cut = len / 3;
            assert_eq!(
                super::update(super::update(0, &d[..cut]), &d[cut..]),
                reference(d)
            );
        }
    }
}
