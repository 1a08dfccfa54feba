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

/// The words of one value, lowercased, one after another in one string
/// that is reused from value to value (no allocation per word).
#[derive(Default)]
pub struct Words {
    text: String,
    ends: Vec<usize>,
}

impl Words {
    /// Replaces the words held with those of v.
    pub fn split(&mut self, v: &[u8]) {
        self.text.clear();
        self.ends.clear();
        let mut start = 0;
        for chunk in Utf8Chunks::new(v) {
            let s = chunk.0;
            let b = s.as_bytes();
            let mut i = 0;
            while i < b.len() {
                // ASCII, most text, byte by byte: decoding a char and
                // its lowercase iterator cost twice the C plugin's split.
                if b[i] < 0x80 {
                    if b[i].is_ascii_alphanumeric() {
                        self.text.push(b[i].to_ascii_lowercase() as char);
                    } else {
                        self.flush(&mut start);
                    }
                    i += 1;
                    continue;
                }
                let c = s[i..].chars().next().unwrap_or(' ');
                i += c.len_utf8();
                if c.is_alphanumeric() {
                    for l in c.to_lowercase() {
                        self.text.push(l);
                    }
                } else {
                    self.flush(&mut start);
                }
            }
            if chunk.1 {
                self.flush(&mut start);
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

    /// The words one after another.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Word i.
    pub fn get(&self, i: usize) -> &str {
        let (a, b) = self.range(i);
        &self.text[a..b]
    }
}

/// Splits bytes into (valid UTF-8 run, followed by an invalid byte?) pairs
/// (std's Utf8Chunks is newer than Rust 1.63).
struct Utf8Chunks<'a> {
    rest: &'a [u8],
}

impl<'a> Utf8Chunks<'a> {
    fn new(b: &'a [u8]) -> Self {
        Utf8Chunks { rest: b }
    }
}

impl<'a> Iterator for Utf8Chunks<'a> {
    type Item = (&'a str, bool);
    fn next(&mut self) -> Option<(&'a str, bool)> {
        if self.rest.is_empty() {
            return None;
        }
        match std::str::from_utf8(self.rest) {
            Ok(s) => {
                self.rest = &[];
                Some((s, false))
            }
            Err(e) => {
                let good = e.valid_up_to();
                let bad = e.error_len().unwrap_or(self.rest.len() - good);
                // SAFETY: from_utf8 vouched for the bytes below valid_up_to.
                let s = unsafe { std::str::from_utf8_unchecked(&self.rest[..good]) };
                self.rest = &self.rest[good + bad..];
                Some((s, true))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Words;

    fn all(w: &Words) -> Vec<&str> {
        (0..w.len()).map(|i| w.get(i)).collect()
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
}
