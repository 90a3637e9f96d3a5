//! CRC-32 (IEEE 802.3, the zlib polynomial), table driven, computed at compile time.

const fn make_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static TABLE: [u32; 256] = make_table();

/// Continues a CRC over `bytes` (start with `0`).
pub fn update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c = TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_vector() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(super::update(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(
            super::update(super::update(0, b"1234"), b"56789"),
            0xCBF4_3926
        );
    }
}
