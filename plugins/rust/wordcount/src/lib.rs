//! wordcount: splits each record's value into words, keeps a running count
//! per word in the store "counts" (8-byte big-endian) and emits word ->
//! count to the output "counts" for each distinct word of the record, in
//! order of first appearance (emit: update), or once per commit window for
//! each word that changed in it (emit: commit, through commit marks), like
//! plugins/wordcount in Go (see its README.md).
//! Config: {"value_format": "decimal" | "int64", "emit": "update" | "commit"}.
//!
//! Words are those of the `words` crate (plugins/rust/words).

use std::cell::RefCell;
use wasmstream::{Commit, Errno, Out, Output, Record, Result, Store};

static STORE: Store = wasmstream::store!("counts");
static OUT: Output = wasmstream::output!("counts");

thread_local! {
    /// value_format is decimal (true) or int64 (false); set by init.
    static DECIMAL: RefCell<bool> = RefCell::new(true);
    /// emit: commit (true): a record updates the counts and marks its
    /// words; committed emits each marked word's count once per window.
    static AT_COMMIT: RefCell<bool> = RefCell::new(false);
    /// Per-record scratch, reused: the words one after another, their ends,
    /// and the distinct ones with their count in the record.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[derive(Default)]
struct Scratch {
    words: words::Words,
    distinct: Vec<(usize, usize, u64)>, // start, end in words.text(), count
    val: Vec<u8>,
    stored: Vec<u8>,
}

/// The fields of the config: value_format (default "decimal") and emit
/// (default "update").
fn parse_config(cfg: &str) -> std::result::Result<(String, String), String> {
    let mut format = "decimal".to_string();
    let mut emit = "update".to_string();
    let t = cfg.trim();
    if t.is_empty() || t == "null" || t == "{}" {
        return Ok((format, emit));
    }
    // The config is a flat object from the host's YAML; this finds the
    // fields without a JSON library (the SDK carries none).
    let inner = t
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| format!("wordcount: config: not a JSON object: {}", t))?;
    for part in inner.split(',') {
        let (k, v) = part.split_once(':').ok_or_else(|| format!("wordcount: config: cannot read {:?}", part))?;
        let v = v.trim().trim_matches('"').to_string();
        match k.trim().trim_matches('"') {
            "value_format" => format = v,
            "emit" => emit = v,
            k => return Err(format!("wordcount: config: unknown field {:?} (known: emit, value_format)", k)),
        }
    }
    Ok((format, emit))
}

fn init() -> Result<()> {
    let c = wasmstream::config();
    let (format, emit) = parse_config(&String::from_utf8_lossy(&c))?;
    if format != "decimal" && format != "int64" {
        return Err(format!("wordcount: config: \"value_format\": must be \"decimal\" or \"int64\"; got {:?}", format).into());
    }
    if emit != "update" && emit != "commit" {
        return Err(format!("wordcount: config: \"emit\": must be \"update\" or \"commit\"; got {:?}", emit).into());
    }
    STORE.check().map_err(|e| format!("wordcount: {}", e))?;
    OUT.check().map_err(|e| format!("wordcount: {}", e))?;
    DECIMAL.with(|d| *d.borrow_mut() = format == "decimal");
    AT_COMMIT.with(|a| *a.borrow_mut() = emit == "commit");
    Ok(())
}

pub fn process(r: &Record) -> Result<()> {
    let at_commit = AT_COMMIT.with(|a| *a.borrow());
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
        for i in 0..s.distinct.len() {
            let (a, b, n) = s.distinct[i];
            let key = &s.words.text()[a..b];
            let total = count(key, &mut s.stored)?.unwrap_or(0) + n;
            STORE.put(key, &total.to_be_bytes())?;
            if at_commit {
                // Marks are staged like state writes: a record that fails
                // after this leaves none.
                match wasmstream::commit_mark(key) {
                    Ok(_) => continue,
                    // The window holds as many marked keys as the host
                    // allows (limits.commit_marks): this word's count goes
                    // out now instead, as in update mode.
                    Err(e) if e.errno() == Some(Errno::LIMIT) => {}
                    Err(e) => return Err(e),
                }
            }
            emit(key, total, decimal, &mut s.val)?;
        }
        Ok(())
    })
}

/// The commit function of emit: commit, once per word marked in the ending
/// window, in key order: it emits the word's count as it stands at the end
/// of the window, with the timestamp of the last record that changed it.
pub fn committed(c: &Commit) -> Result<()> {
    SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        // Not found: only a time to live on the store removes a count, and
        // it expired after the record that marked it; nothing to emit.
        match count(c.key(), &mut s.stored)? {
            Some(total) => emit(c.key(), total, DECIMAL.with(|d| *d.borrow()), &mut s.val),
            None => Ok(()),
        }
    })
}

/// The stored count of key (8-byte big-endian), read through buf.
fn count(key: &[u8], buf: &mut Vec<u8>) -> Result<Option<u64>> {
    if !STORE.get_into(key, buf)? {
        return Ok(None);
    }
    if buf.len() != 8 {
        return Err(format!(
            "wordcount: store \"counts\" holds {} bytes for word {:?}, want an 8-byte count",
            buf.len(),
            String::from_utf8_lossy(key)
        )
        .into());
    }
    let mut x = [0u8; 8];
    x.copy_from_slice(buf);
    Ok(Some(u64::from_be_bytes(x)))
}

/// Emits word -> total as decimal text or 8 bytes (value_format); the SDK
/// stamps it with the record's timestamp, or in committed the one the host
/// kept with the mark.
fn emit(word: &[u8], total: u64, decimal: bool, val: &mut Vec<u8>) -> Result<()> {
    val.clear();
    if decimal {
        val.extend_from_slice(total.to_string().as_bytes());
    } else {
        val.extend_from_slice(&total.to_be_bytes());
    }
    OUT.emit(&Out::new(Some(word), Some(val)))
}

wasmstream::processor!(process, init, on_commit = committed);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    /// The fake host as the plugin is deployed, with config cfg, not
    /// started.
    fn unstarted(cfg: &str) -> Host<fn(&wasmstream::Record) -> wasmstream::Result<()>> {
        Host::new(super::process as fn(&wasmstream::Record) -> wasmstream::Result<()>)
            .outputs(&["counts"])
            .stores(&["counts"])
            .config(cfg)
            .init(super::init)
            .on_commit(super::committed)
    }

    fn host(cfg: &str) -> Host<fn(&wasmstream::Record) -> wasmstream::Result<()>> {
        let mut h = unstarted(cfg);
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
        let err = unstarted(r#"{"value_format":"hex"}"#).start().unwrap_err();
        assert!(err.contains("must be \"decimal\" or \"int64\""));
    }

    #[test]
    fn emit_commit_emits_each_changed_word_once_per_window() {
        let mut h = host(r#"{"emit":"commit"}"#);
        let mut rec = Input::kv("k", "b a b");
        rec.timestamp = 5;
        assert!(h.process(&rec).emitted.is_empty());
        rec.value = Some(b"a".to_vec());
        rec.timestamp = 9;
        assert!(h.process(&rec).emitted.is_empty());
        let res = h.commit();
        assert_eq!(emitted(&res), ["a=2", "b=2"]);
        assert_eq!(res.emitted[0].timestamp, 9, "a's last mark");
        assert!(h.commit().callbacks.is_empty());
    }

    #[test]
    fn emit_commit_past_the_mark_limit_emits_at_once() {
        let mut h = unstarted(r#"{"emit": "commit", "value_format": "decimal"}"#).commit_marks(1);
        let res = h.process(&Input::kv("k", "x y"));
        assert_eq!(emitted(&res), ["y=1"]);
        assert_eq!(emitted(&h.commit()), ["x=1"]);
    }

    #[test]
    fn bad_emit() {
        let err = unstarted(r#"{"emit":"never"}"#).start().unwrap_err();
        assert!(err.contains("\"emit\": must be \"update\" or \"commit\""));
    }
}
