//! wordcount: splits each record's value into words, keeps a running count
//! per word in the store "counts" (8-byte big-endian) and emits word ->
//! count to the output "counts" for each distinct word of the record, in
//! order of first appearance, like plugins/wordcount in Go (see its
//! README.md). Config: {"value_format": "decimal" | "int64"}.
//!
//! Words are those of the `words` crate (plugins/rust/words).

use std::cell::RefCell;
use wasmstream::{Out, Output, Record, Result, Store};

static STORE: Store = Store::new("counts");
static OUT: Output = Output::new("counts");

thread_local! {
    /// value_format is decimal (true) or int64 (false); set by init.
    static DECIMAL: RefCell<bool> = RefCell::new(true);
    /// Per-record scratch, reused: the words one after another, their ends,
    /// and the distinct ones with their count in the record.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[derive(Default)]
struct Scratch {
    words: words::Words,
    distinct: Vec<(usize, usize, u64)>, // start, end in words.text(), count
    val: Vec<u8>,
}

/// The value of "value_format" in the config: its string, or "decimal".
fn value_format(cfg: &str) -> std::result::Result<String, String> {
    let t = cfg.trim();
    if t.is_empty() || t == "null" || t == "{}" {
        return Ok("decimal".into());
    }
    // The config is a flat object from the host's YAML; this finds the one
    // field without a JSON library (the SDK carries none).
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| format!("wordcount: config: not a JSON object: {}", t))?;
    let mut format = "decimal".to_string();
    for part in inner.split(',') {
        let (k, v) = part.split_once(':').ok_or_else(|| format!("wordcount: config: cannot read {:?}", part))?;
        let k = k.trim().trim_matches('"');
        if k != "value_format" {
            return Err(format!("wordcount: config: unknown field {:?} (known: value_format)", k));
        }
        format = v.trim().trim_matches('"').to_string();
    }
    Ok(format)
}

fn init() -> Result<()> {
    let c = wasmstream::config();
    let format = value_format(&String::from_utf8_lossy(&c))?;
    if format != "decimal" && format != "int64" {
        return Err(format!("wordcount: config: \"value_format\": must be \"decimal\" or \"int64\"; got {:?}", format).into());
    }
    STORE.check().map_err(|e| format!("wordcount: {}", e))?;
    OUT.check().map_err(|e| format!("wordcount: {}", e))?;
    DECIMAL.with(|d| *d.borrow_mut() = format == "decimal");
    Ok(())
}

pub fn process(r: &Record) -> Result<()> {
    let decimal = DECIMAL.with(|d| *d.borrow());
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        s.words.split(r.value().unwrap_or(b""));
        s.distinct.clear();
        let text = s.words.text();
        for i in 0..s.words.len() {
            let (start, end) = s.words.range(i);
            let w = &text[start..end];
            match s.distinct.iter_mut().find(|d| &text[d.0..d.1] == w) {
                Some(d) => d.2 += 1,
                None => s.distinct.push((start, end, 1)),
            }
        }
        let mut stored = Vec::with_capacity(8);
        for i in 0..s.distinct.len() {
            let (a, b, n) = s.distinct[i];
            let key = &s.words.text().as_bytes()[a..b];
            let total = match STORE.get_into(key, &mut stored)? {
                false => n,
                true if stored.len() == 8 => {
                    let mut x = [0u8; 8];
                    x.copy_from_slice(&stored);
                    u64::from_be_bytes(x) + n
                }
                true => {
                    return Err(format!(
                        "wordcount: store \"counts\" holds {} bytes for word {:?}, want an 8-byte count",
                        stored.len(),
                        String::from_utf8_lossy(key)
                    )
                    .into())
                }
            };
            STORE.put(key, &total.to_be_bytes())?;
            s.val.clear();
            if decimal {
                s.val.extend_from_slice(total.to_string().as_bytes());
            } else {
                s.val.extend_from_slice(&total.to_be_bytes());
            }
            OUT.emit(&Out::new(Some(key), Some(&s.val)))?;
        }
        Ok(())
    })
}

wasmstream::processor!(process, init);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    fn host(cfg: &str) -> Host<fn(&wasmstream::Record) -> wasmstream::Result<()>> {
        let mut h = Host::new(super::process as fn(&wasmstream::Record) -> wasmstream::Result<()>)
            .outputs(&["counts"])
            .stores(&["counts"])
            .config(cfg)
            .init(super::init);
        h.start().unwrap();
        h
    }

    fn emitted(res: &wasmstream::testing::Outcome) -> Vec<String> {
        res.emitted
            .iter()
            .map(|e| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(e.key.as_deref().unwrap()),
                    String::from_utf8_lossy(e.value.as_deref().unwrap())
                )
            })
            .collect()
    }

    #[test]
    fn counts_across_records() {
        let mut h = host("{}");
        let res = h.process(&Input::kv("k", "The cat, the HAT; don't"));
        assert_eq!(emitted(&res), ["the=2", "cat=1", "hat=1", "don=1", "t=1"]);
        let res = h.process(&Input::kv("k", "Ça va, ÇA VA"));
        assert_eq!(emitted(&res), ["ça=2", "va=2"]);
        let res = h.process(&Input::kv("k", "the"));
        assert_eq!(emitted(&res), ["the=3"]);
        assert_eq!(h.get("counts", b"the"), Some(3u64.to_be_bytes().to_vec()));
    }

    #[test]
    fn int64_format_and_bad_state() {
        let mut h = host(r#"{"value_format":"int64"}"#);
        let res = h.process(&Input::kv("k", "a"));
        assert_eq!(res.emitted[0].value, Some(1u64.to_be_bytes().to_vec()));
        h.put("counts", b"b", b"xyz");
        let res = h.process(&Input::kv("k", "b"));
        assert_eq!(
            res.error.as_deref(),
            Some("wordcount: store \"counts\" holds 3 bytes for word \"b\", want an 8-byte count")
        );
    }

    #[test]
    fn invalid_utf8_separates_and_long_words_are_skipped() {
        let mut h = host("");
        let mut v = b"ab\xffcd ".to_vec();
        v.extend(std::iter::repeat(b'x').take(5000));
        let res = h.process(&Input { value: Some(v), ..Input::default() });
        assert_eq!(emitted(&res), ["ab=1", "cd=1"]);
    }

    #[test]
    fn bad_config() {
        let mut h = wasmstream::testing::Host::new(super::process)
            .outputs(&["counts"])
            .stores(&["counts"])
            .config(r#"{"value_format":"hex"}"#)
            .init(super::init);
        assert!(h.start().unwrap_err().contains("must be \"decimal\" or \"int64\""));
    }
}
