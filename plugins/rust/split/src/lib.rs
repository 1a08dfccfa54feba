//! split: re-keys text by its words, like plugins/split in Go: it splits
//! each record's value into words (the `words` crate, the rule of
//! wordcount) and emits one record per word, in order, keyed by the word,
//! with the word as value, to the output "words". Declared as a
//! repartition output, that output brings every occurrence of a word to
//! one task of the next processor. It takes no config.

use std::cell::RefCell;
use wasmstream::{Out, Output, Record, Result};

static OUT: Output = wasmstream::output!("words");

thread_local! {
    /// Per-record scratch, reused.
    static WORDS: RefCell<words::Words> = RefCell::new(words::Words::default());
}

fn init() -> Result<()> {
    let c = wasmstream::config();
    let trimmed: Vec<u8> = c.iter().copied().filter(|b| !b" \t\r\n".contains(b)).collect();
    if !(trimmed.is_empty() || trimmed == b"null" || trimmed == b"{}") {
        return Err(format!("split: config: takes no config; got {}", String::from_utf8_lossy(&c)).into());
    }
    OUT.check().map_err(|e| format!("split: {}", e).into())
}

pub fn process(r: &Record) -> Result<()> {
    WORDS.with(|w| {
        let w = &mut *w.borrow_mut();
        w.split(r.value().unwrap_or(b""));
        for i in 0..w.len() {
            let word = w.get(i);
            OUT.emit(&Out::new(Some(word), Some(word)))?;
        }
        Ok(())
    })
}

wasmstream::processor!(process, init);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    fn host() -> Host<fn(&wasmstream::Record) -> wasmstream::Result<()>> {
        let mut h = Host::new(super::process as fn(&wasmstream::Record) -> wasmstream::Result<()>)
            .outputs(&["words"])
            .init(super::init);
        h.start().unwrap();
        h
    }

    #[test]
    fn one_record_per_word_keyed_by_it() {
        let mut h = host();
        let res = h.process(&Input::kv("line", "The cat, the hat"));
        let got: Vec<(&[u8], &[u8])> = res
            .emitted
            .iter()
            .map(|e| (e.key.as_deref().unwrap(), e.value.as_deref().unwrap()))
            .collect();
        let want: Vec<(&[u8], &[u8])> = ["the", "cat", "the", "hat"].iter().map(|w| (w.as_bytes(), w.as_bytes())).collect();
        assert_eq!(got, want);
        assert!(h.process(&Input::kv("line", "")).emitted.is_empty());
    }

    #[test]
    fn refuses_config() {
        let mut h = wasmstream::testing::Host::new(super::process)
            .outputs(&["words"])
            .config(r#"{"x":1}"#)
            .init(super::init);
        assert!(h.start().unwrap_err().contains("split: config: takes no config"));
    }
}
