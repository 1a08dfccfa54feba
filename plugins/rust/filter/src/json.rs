//! The small JSON toolkit of the filter, a port of plugins/internal/jsonx
//! (the Go plugins'): validate a document, find the values at a dot path
//! without decoding the rest, unquote strings, decode the config. The
//! grammar is RFC 8259's; nesting is limited to MAX_DEPTH so that a hostile
//! record cannot exhaust the stack.

pub const MAX_DEPTH: usize = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    Null,
    Bool,
    Number,
    String,
    Object,
    Array,
}

pub fn kind_of(raw: &[u8]) -> Kind {
    match raw.first() {
        Some(b'n') => Kind::Null,
        Some(b't') | Some(b'f') => Kind::Bool,
        Some(b'"') => Kind::String,
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(c) if *c == b'-' || c.is_ascii_digit() => Kind::Number,
        _ => Kind::Invalid,
    }
}

fn skip_ws(d: &[u8], mut i: usize) -> usize {
    while i < d.len() && matches!(d[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The end of the value at d[i], or None.
fn scan_value(d: &[u8], i: usize, depth: usize) -> Option<usize> {
    match *d.get(i)? {
        b'"' => scan_string(d, i),
        b'{' | b'[' => scan_container(d, i, depth, &mut |_, _, s| scan_value(d, s, depth + 1)),
        b't' => literal(d, i, b"true"),
        b'f' => literal(d, i, b"false"),
        b'n' => literal(d, i, b"null"),
        c if c == b'-' || c.is_ascii_digit() => scan_number(d, i),
        _ => None,
    }
}

fn literal(d: &[u8], i: usize, lit: &[u8]) -> Option<usize> {
    if d.len() - i >= lit.len() && &d[i..i + lit.len()] == lit {
        Some(i + lit.len())
    } else {
        None
    }
}

fn digits(d: &[u8], mut i: usize) -> usize {
    while i < d.len() && d[i].is_ascii_digit() {
        i += 1;
    }
    i
}

fn scan_number(d: &[u8], mut i: usize) -> Option<usize> {
    if d[i] == b'-' {
        i += 1;
    }
    match d.get(i) {
        Some(b'0') => i += 1,
        Some(c) if (b'1'..=b'9').contains(c) => i = digits(d, i),
        _ => return None,
    }
    if d.get(i) == Some(&b'.') {
        let j = digits(d, i + 1);
        if j == i + 1 {
            return None;
        }
        i = j;
    }
    if matches!(d.get(i), Some(b'e') | Some(b'E')) {
        i += 1;
        if matches!(d.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        let j = digits(d, i);
        if j == i {
            return None;
        }
        i = j;
    }
    Some(i)
}

fn hex_val(c: u8) -> Option<u32> {
    (c as char).to_digit(16)
}

fn scan_string(d: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < d.len() {
        match d[i] {
            b'"' => return Some(i + 1),
            b'\\' => match d.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    if d.len() - i < 6 || !d[i + 2..i + 6].iter().all(|c| hex_val(*c).is_some()) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
    None
}

/// Scans the container at d[i], calling m(key token or None, index, value
/// start) for each member, which returns the value's end.
fn scan_container(
    d: &[u8],
    i: usize,
    depth: usize,
    m: &mut dyn FnMut(Option<&[u8]>, usize, usize) -> Option<usize>,
) -> Option<usize> {
    if depth >= MAX_DEPTH {
        return None;
    }
    let obj = d[i] == b'{';
    let closer = if obj { b'}' } else { b']' };
    let mut i = skip_ws(d, i + 1);
    if d.get(i) == Some(&closer) {
        return Some(i + 1);
    }
    let mut index = 0;
    loop {
        let mut key = None;
        if obj {
            if d.get(i) != Some(&b'"') {
                return None;
            }
            let end = scan_string(d, i)?;
            key = Some(&d[i..end]);
            i = skip_ws(d, end);
            if d.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(d, i + 1);
        }
        let end = m(key, index, i)?;
        i = skip_ws(d, end);
        match *d.get(i)? {
            c if c == closer => return Some(i + 1),
            b',' => i = skip_ws(d, i + 1),
            _ => return None,
        }
        index += 1;
    }
}

/// Calls f(start, end) for every value at path; reports whether d is valid.
fn find(d: &[u8], path: &[String], f: &mut dyn FnMut(usize, usize)) -> bool {
    let i = skip_ws(d, 0);
    match find_at(d, i, path, 0, f) {
        Some(end) => skip_ws(d, end) == d.len(),
        None => false,
    }
}

fn find_at(d: &[u8], i: usize, path: &[String], depth: usize, f: &mut dyn FnMut(usize, usize)) -> Option<usize> {
    if path.is_empty() {
        let end = scan_value(d, i, depth)?;
        f(i, end);
        return Some(end);
    }
    if !matches!(d.get(i), Some(b'{') | Some(b'[')) {
        return scan_value(d, i, depth);
    }
    let (seg, rest) = (&path[0], &path[1..]);
    let index: Option<usize> = if d[i] == b'[' { parse_index(seg) } else { None };
    scan_container(d, i, depth, &mut |key, idx, start| {
        let hit = if seg == "*" {
            true
        } else if let Some(k) = key {
            key_equals(k, seg)
        } else {
            Some(idx) == index
        };
        if hit {
            find_at(d, start, rest, depth + 1, f)
        } else {
            scan_value(d, start, depth + 1)
        }
    })
}

/// A decimal array index as Go's strconv.Atoi with n >= 0 reads it.
fn parse_index(s: &str) -> Option<usize> {
    let t = s.strip_prefix('+').unwrap_or(s);
    if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

fn key_equals(tok: &[u8], s: &str) -> bool {
    let inner = &tok[1..tok.len() - 1];
    if inner.contains(&b'\\') {
        return unquote(tok).map_or(false, |u| u == s);
    }
    inner == s.as_bytes()
}

/// The last value at path (valid = false: d is not JSON).
pub fn lookup<'a>(d: &'a [u8], path: &[String]) -> (Option<&'a [u8]>, bool) {
    let mut span = None;
    let valid = find(d, path, &mut |s, e| span = Some((s, e)));
    if !valid {
        return (None, false);
    }
    (span.map(|(s, e)| &d[s..e]), true)
}

fn hex4(b: &[u8]) -> u32 {
    b[..4].iter().fold(0, |a, c| a << 4 | hex_val(*c).unwrap_or(0))
}

/// Decodes a string token (quotes included); invalid UTF-8 and unpaired
/// surrogates become U+FFFD.
pub fn unquote(tok: &[u8]) -> Option<String> {
    if tok.len() < 2 || tok[0] != b'"' || scan_string(tok, 0) != Some(tok.len()) {
        return None;
    }
    let s = &tok[1..tok.len() - 1];
    let mut out: Vec<u8> = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            let start = i;
            while i < s.len() && s[i] != b'\\' {
                i += 1;
            }
            out.extend_from_slice(String::from_utf8_lossy(&s[start..i]).as_bytes());
            continue;
        }
        let c = match s[i + 1] {
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let r = hex4(&s[i + 2..]);
                i += 6;
                let mut ch = char::from_u32(r).unwrap_or('\u{fffd}');
                if (0xd800..0xe000).contains(&r) {
                    ch = '\u{fffd}';
                    if s.len() - i >= 6 && s[i] == b'\\' && s[i + 1] == b'u' {
                        let r2 = hex4(&s[i + 2..]);
                        if (0xd800..0xdc00).contains(&r) && (0xdc00..0xe000).contains(&r2) {
                            ch = char::from_u32(((r - 0xd800) << 10 | (r2 - 0xdc00)) + 0x10000).unwrap();
                            i += 6;
                        }
                    }
                }
                let mut b = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                continue;
            }
            other => other as char,
        };
        out.push(c as u8);
        i += 2;
    }
    String::from_utf8(out).ok()
}

/// A decoded config value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// Decodes a whole document (the processor's config).
pub fn decode(d: &[u8]) -> Result<Value, String> {
    let i = skip_ws(d, 0);
    let (v, end) = decode_at(d, i, 0).ok_or("not valid JSON")?;
    if skip_ws(d, end) != d.len() {
        return Err("not valid JSON".into());
    }
    Ok(v)
}

fn decode_at(d: &[u8], i: usize, depth: usize) -> Option<(Value, usize)> {
    let end = scan_value(d, i, depth)?;
    let raw = &d[i..end];
    let v = match kind_of(raw) {
        Kind::Null => Value::Null,
        Kind::Bool => Value::Bool(raw[0] == b't'),
        Kind::Number => Value::Number(std::str::from_utf8(raw).ok()?.parse().ok()?),
        Kind::String => Value::String(unquote(raw)?),
        Kind::Array => {
            let mut items = Vec::new();
            scan_container(d, i, depth, &mut |_, _, s| {
                let (v, e) = decode_at(d, s, depth + 1)?;
                items.push(v);
                Some(e)
            })?;
            Value::Array(items)
        }
        Kind::Object => {
            let mut members = Vec::new();
            scan_container(d, i, depth, &mut |k, _, s| {
                let (v, e) = decode_at(d, s, depth + 1)?;
                members.push((unquote(k?)?, v));
                Some(e)
            })?;
            Value::Object(members)
        }
        Kind::Invalid => return None,
    };
    Some((v, end))
}
