//! words: the word rule of the bundled Rust plugins (wordcount, split),
//! like plugins/internal/words in Go.
//!
//! Words are maximal runs of `char::is_alphanumeric` characters, lowercased
//! with `char::to_lowercase`. That is Go's unicode.IsLetter/IsDigit and
//! ToLower for every letter and decimal digit; it differs only for
//! combining marks and numerals that Rust counts as alphanumeric and Go
//! does not (U+0345, Roman numerals...), and for 'İ', which lowercases to
//! two characters. Invalid UTF-8 separates words; words over
//! `abi::MAX_KEY_SIZE` bytes are skipped (they cannot be keys of state).

use wasmstream::abi;

/// The words of one value, lowercased, one after another in one buffer
/// that is reused from value to value (no allocation per word). The buffer
/// holds valid UTF-8: ASCII bytes and the encodings of whole chars.
#[derive(Default)]
pub struct Words {
    text: Vec<u8>,
    ends: Vec<usize>,
}

impl Words {
    /// Replaces the words held with those of v.
    pub fn split(&mut self, v: &[u8]) {
        self.text.clear();
        self.ends.clear();
        // A value's words are at most its length in ASCII; non-ASCII
        // lowercasing that grows reserves its own room.
        self.text.reserve(v.len());
        let mut start = 0;
        let mut i = 0;
        while i < v.len() {
            let b = v[i];
            // ASCII, most text, byte by byte without a UTF-8 validation
            // pass over the value: the split is a good part of what the
            // Rust plugins cost per record.
            if b < 0x80 {
                if b.is_ascii_alphanumeric() {
                    self.text.push(b.to_ascii_lowercase());
                } else {
                    self.flush(&mut start);
                }
                i += 1;
                continue;
            }
            match next_char(&v[i..]) {
                Some((c, n)) => {
                    i += n;
                    if c.is_alphanumeric() {
                        let mut enc = [0u8; 4];
                        for l in c.to_lowercase() {
                            self.text.extend_from_slice(l.encode_utf8(&mut enc).as_bytes());
                        }
                    } else {
                        self.flush(&mut start);
                    }
                }
                // Invalid UTF-8 separates words; the next byte starts over.
                None => {
                    i += 1;
                    self.flush(&mut start);
                }
            }
        }
        self.flush(&mut start);
    }

    /// Ends the word that starts at *start, or drops it if it is too long.
    fn flush(&mut self, start: &mut usize) {
        if self.text.len() > *start {
            if self.text.len() - *start > abi::MAX_KEY_SIZE {
                self.text.truncate(*start);
            } else {
                self.ends.push(self.text.len());
                *start = self.text.len();
            }
        }
    }

    /// The number of words held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no word is held.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The byte range of word i in `text()`.
    pub fn range(&self, i: usize) -> (usize, usize) {
        (if i == 0 { 0 } else { self.ends[i - 1] }, self.ends[i])
    }

    /// The words one after another, as bytes (valid UTF-8).
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Word i, as bytes (valid UTF-8).
    pub fn get(&self, i: usize) -> &[u8] {
        let (a, b) = self.range(i);
        &self.text[a..b]
    }
}

/// The char that b starts with (b[0] is not ASCII) and its length in
/// bytes, or `None` if b does not start with valid UTF-8: std's validation
/// of at most one char's bytes, which rejects overlong forms, surrogates
/// and code points past U+10FFFF as the whole-value check did.
fn next_char(b: &[u8]) -> Option<(char, usize)> {
    let n = match b[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let s = std::str::from_utf8(b.get(..n)?).ok()?;
    s.chars().next().map(|c| (c, n))
}

#[cfg(test)]
mod tests {
    use super::Words;

    fn all(w: &Words) -> Vec<&str> {
        (0..w.len()).map(|i| std::str::from_utf8(w.get(i)).unwrap()).collect()
    }

    #[test]
    fn rules() {
        let mut w = Words::default();
        w.split(b"The cat, the HAT; don't");
        assert_eq!(all(&w), ["the", "cat", "the", "hat", "don", "t"]);
        w.split("Ça va? ÇA VA! Über straße x2Y".as_bytes());
        assert_eq!(all(&w), ["ça", "va", "ça", "va", "über", "straße", "x2y"]);
        w.split(b"ab\xffcd");
        assert_eq!(all(&w), ["ab", "cd"]);
        let mut long = b"x".repeat(wasmstream::abi::MAX_KEY_SIZE + 1);
        long.extend_from_slice(b" short");
        w.split(&long);
        assert_eq!(all(&w), ["short"]);
        w.split(b"");
        assert!(w.is_empty());
    }

    /// The rule over the value with each invalid UTF-8 sequence replaced by
    /// U+FFFD (not alphanumeric), as from_utf8_lossy does: what split must
    /// give without that pass.
    fn reference(v: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        for c in String::from_utf8_lossy(v).chars() {
            if c.is_alphanumeric() {
                cur.extend(c.to_lowercase());
            } else if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        out.push(cur);
        out.retain(|w| !w.is_empty() && w.len() <= wasmstream::abi::MAX_KEY_SIZE);
        out
    }

    #[test]
    fn invalid_utf8_splits_like_the_lossy_reading() {
        let pieces: &[&[u8]] = &[
            b"a", b"Z9", b" ", b"\xc3\xa9", b"\xc3", b"\xe2\x82", b"\xe2\x82\xac", b"\xe0\x80\x80", b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80", b"\xf0\x9f\x98\x80", b"\xc4\xb0", b"\xff", b"\x80", b"\xc0\xaf", b"\xce\xa3",
        ];
        let mut w = Words::default();
        // Every sequence of three pieces.
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let v = [*a, *b, *c].concat();
                    w.split(&v);
                    assert_eq!(all(&w), reference(&v), "{:?}", v);
                }
            }
        }
    }
}
