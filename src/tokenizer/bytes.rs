//! GPT-2's byte ↔ unicode mapping. Byte-level BPE vocabularies never store raw bytes: each byte
//! is written as one printable character (`Ġ` = space, `Ċ` = `\n`), so every token is a valid
//! string. Printable Latin-1 bytes map to themselves; the other 68 bytes (controls, space, 0x7F–0xA0,
//! 0xAD) map to U+0100 onwards, in byte order. This is `bytes_to_unicode` from GPT-2's encoder.py,
//! the same table as llama.cpp's `unicode_byte_to_utf8`.

/// Is `b` one of the bytes that GPT-2 keeps as its own character?
const fn is_printable(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The character that stands for each byte.
const BYTE_TO_CHAR: [char; 256] = {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    let mut b = 0usize;
    while b < 256 {
        let code = if is_printable(b as u8) {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        // Every code here is below 0x200, so it is a valid scalar value.
        table[b] = match char::from_u32(code) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
};

/// The inverse: characters U+0000..U+01FF back to their byte (`None` above U+0143 or unused).
const CHAR_TO_BYTE: [Option<u8>; 512] = {
    let mut table = [None; 512];
    let mut b = 0usize;
    while b < 256 {
        table[BYTE_TO_CHAR[b] as usize] = Some(b as u8);
        b += 1;
    }
    table
};

/// The character that stands for byte `b` in a byte-level vocabulary.
pub fn byte_to_char(b: u8) -> char {
    BYTE_TO_CHAR[b as usize]
}

/// The byte a vocabulary character stands for, if it is one of the 256 mapped characters.
pub fn char_to_byte(c: char) -> Option<u8> {
    CHAR_TO_BYTE.get(c as usize).copied().flatten()
}

/// Raw bytes → vocabulary form (`"a b"` → `"aĠb"`).
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

/// Vocabulary form → raw bytes. A character outside the mapping (only possible in a malformed
/// vocabulary) is kept as its own UTF-8 bytes; llama.cpp writes `[UNK_BYTE_0x..]` there instead,
/// but keeping the text is the more useful lossless choice.
pub fn decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b), "byte {b:#04x}");
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)), all);
    }

    #[test]
    fn known_characters() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'\r'), 'č');
        assert_eq!(byte_to_char(b'\t'), 'ĉ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), 'Ń');
        assert_eq!(byte_to_char(0x00), 'Ā');
        // The mapping is a bijection onto 256 distinct characters.
        let mut chars: Vec<char> = (0..=255u8).map(byte_to_char).collect();
        chars.sort_unstable();
        chars.dedup();
        assert_eq!(chars.len(), 256);
    }

    #[test]
    fn unmapped_characters_are_kept() {
        assert_eq!(decode("héĠ€"), b"h\xe9 \xe2\x82\xac".to_vec());
        assert_eq!(char_to_byte('€'), None);
    }
}
