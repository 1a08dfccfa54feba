//! filter: keeps the records whose JSON value satisfies one condition and
//! emits them unchanged to an output; everything else is dropped. The same
//! config and semantics as plugins/filter in Go (see its README.md):
//!
//! {"field": "user.country", "op": "eq", "value": "NL", "output": "out", "invalid_output": "bad"}
//!
//! ops: eq, ne, exists, gt, ge, lt, le, in. Records that are not JSON
//! (tombstones and empty values included) go to invalid_output if set.

mod json;

use json::{kind_of, Kind, Value};
use std::cell::RefCell;
use wasmstream::{Output, Record, Result};

const OPS: &str = "eq, ne, exists, gt, ge, lt, le, in";

/// The parsed config. init replaces it whole, so an instance never runs
/// with half of one config and half of another.
struct Settings {
    path: Vec<String>,
    op: String,
    value: Value,
    values: Vec<Value>,
    out: &'static Output,
    invalid: Option<&'static Output>,
}

thread_local! {
    static CFG: RefCell<Option<Settings>> = RefCell::new(None);
}

/// An output handle per name the config uses, made once per name and kept
/// for the instance's life (handles are statics in spirit).
fn output(name: &str) -> &'static Output {
    thread_local! {
        static OUTPUTS: RefCell<Vec<&'static Output>> = RefCell::new(Vec::new());
    }
    OUTPUTS.with(|o| {
        let mut o = o.borrow_mut();
        if let Some(h) = o.iter().find(|h| h.name() == name) {
            return *h;
        }
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        let h: &'static Output = Box::leak(Box::new(Output::new(name)));
        o.push(h);
        h
    })
}

fn fail(key: &str, msg: &str) -> String {
    format!("filter: config: {:?}: {}", key, msg)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn parse(raw: &[u8]) -> std::result::Result<Settings, String> {
    let text = String::from_utf8_lossy(raw);
    let t = text.trim();
    let members = if t.is_empty() || t == "null" {
        Vec::new()
    } else {
        match json::decode(t.as_bytes()) {
            Ok(Value::Object(m)) => m,
            Ok(other) => return Err(format!("filter: config: must be a JSON object, got {}", type_name(&other))),
            Err(_) => return Err("filter: config: invalid JSON".into()),
        }
    };
    const KNOWN: [&str; 5] = ["field", "invalid_output", "op", "output", "value"];
    let mut unknown: Vec<String> =
        members.iter().filter(|(k, _)| !KNOWN.contains(&k.as_str())).map(|(k, _)| format!("{:?}", k)).collect();
    let get = |k: &str| members.iter().rev().find(|(m, _)| m == k).map(|(_, v)| v);
    let string = |k: &str, def: &str| -> std::result::Result<String, String> {
        match get(k) {
            None => Ok(def.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(fail(k, &format!("must be a string, got {}", type_name(v)))),
        }
    };
    let field = match get("field") {
        None => return Err(fail("field", "required")),
        Some(_) => string("field", "")?,
    };
    if field.is_empty() || field.split('.').any(|s| s.is_empty()) {
        return Err(fail("field", &format!("empty segment in path {:?}", field)));
    }
    let op = string("op", "eq")?;
    let mut s = Settings {
        path: field.split('.').map(|x| x.to_string()).collect(),
        op: op.clone(),
        value: Value::Null,
        values: Vec::new(),
        out: output("out"),
        invalid: None,
    };
    let v = get("value");
    match op.as_str() {
        "eq" | "ne" => match v {
            None => return Err(fail("value", &format!("required for op {}", op))),
            Some(x) if is_scalar(x) => s.value = x.clone(),
            Some(_) => {
                return Err(fail("value", &format!("must be a string, number, boolean or null for op {}", op)))
            }
        },
        "gt" | "ge" | "lt" | "le" => match v {
            Some(Value::Number(n)) => s.value = Value::Number(*n),
            _ => return Err(fail("value", &format!("must be a number for op {}", op))),
        },
        "in" => match v {
            Some(Value::Array(list)) if !list.is_empty() => {
                for (i, e) in list.iter().enumerate() {
                    if !is_scalar(e) {
                        return Err(fail(&format!("value[{}]", i), "must be a string, number, boolean or null"));
                    }
                    s.values.push(e.clone());
                }
            }
            _ => return Err(fail("value", "must be a non-empty list for op in")),
        },
        "exists" => {
            if v.is_some() {
                return Err(fail("value", "not used by op exists; remove it"));
            }
        }
        _ => return Err(fail("op", &format!("must be one of {}; got {:?}", OPS, op))),
    }
    s.out = output(&string("output", "out")?);
    let inv = string("invalid_output", "")?;
    if !inv.is_empty() {
        s.invalid = Some(output(&inv));
    }
    if !unknown.is_empty() {
        unknown.sort();
        return Err(format!("filter: config: unknown field {} (known: {})", unknown.join(", "), KNOWN.join(", ")));
    }
    if s.out.check().is_err() {
        return Err(fail("output", &format!("output {:?} is not declared by the processor", s.out.name())));
    }
    if let Some(i) = s.invalid {
        if i.check().is_err() {
            return Err(fail("invalid_output", &format!("output {:?} is not declared by the processor", i.name())));
        }
    }
    Ok(s)
}

fn init() -> Result<()> {
    let s = parse(&wasmstream::config())?;
    CFG.with(|c| *c.borrow_mut() = Some(s));
    Ok(())
}

fn number(raw: &[u8]) -> Option<f64> {
    if kind_of(raw) != Kind::Number {
        return None;
    }
    // A number beyond f64 parses as ±inf, as Go's ParseFloat (ErrRange) does.
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// A raw JSON value against a config scalar: same kind; numbers by value,
/// strings after unescaping. Objects and arrays equal nothing.
fn equal(raw: &[u8], want: &Value) -> bool {
    match (kind_of(raw), want) {
        (Kind::Null, Value::Null) => true,
        (Kind::Bool, Value::Bool(b)) => (raw[0] == b't') == *b,
        (Kind::Number, Value::Number(n)) => number(raw) == Some(*n),
        (Kind::String, Value::String(s)) => {
            let inner = &raw[1..raw.len() - 1];
            if !inner.contains(&b'\\') {
                return inner == s.as_bytes();
            }
            json::unquote(raw).map_or(false, |u| &u == s)
        }
        _ => false,
    }
}

fn matches(s: &Settings, raw: Option<&[u8]>) -> bool {
    let raw = match (s.op.as_str(), raw) {
        ("exists", r) => return r.is_some(),
        ("ne", None) => return true,
        ("ne", Some(r)) => return !equal(r, &s.value),
        (_, None) => return false,
        (_, Some(r)) => r,
    };
    match s.op.as_str() {
        "eq" => equal(raw, &s.value),
        "in" => s.values.iter().any(|v| equal(raw, v)),
        op => {
            let (n, w) = match (number(raw), &s.value) {
                (Some(n), Value::Number(w)) => (n, *w),
                _ => return false,
            };
            match op {
                "gt" => n > w,
                "ge" => n >= w,
                "lt" => n < w,
                "le" => n <= w,
                _ => false,
            }
        }
    }
}

pub fn process(r: &Record) -> Result<()> {
    CFG.with(|c| {
        let c = c.borrow();
        let s = c.as_ref().ok_or("filter: not initialised")?;
        let (raw, valid) = match r.value() {
            Some(v) => json::lookup(v, &s.path),
            None => (None, false),
        };
        if !valid {
            return match s.invalid {
                Some(o) => o.forward(r),
                None => Ok(()), // documented: records that are not JSON are dropped
            };
        }
        if matches(s, raw) {
            s.out.forward(r)?;
        }
        Ok(())
    })
}

wasmstream::processor!(process, init);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    /// The Go filter's table (plugins/filter/main_test.go).
    const RECORDS: [&str; 8] = [
        r#"{"user": {"country": "NL", "age": 31}, "tags": ["a"]}"#,
        r#"{"user": {"country": "DE", "age": 17.5}}"#,
        r#"{"user": {"country": "N\u004c", "age": 1e400}}"#,
        r#"{"user": {"country": null, "age": "31"}}"#,
        r#"{"user": {}}"#,
        r#"{"user": {"country": ["NL"], "age": -1}}"#,
        "not json",
        "",
    ];

    fn run(cfg: &str) -> String {
        let mut h = Host::new(super::process).outputs(&["out", "invalid", "kept"]).config(cfg).init(super::init);
        h.start().unwrap();
        let mut got = Vec::new();
        for v in RECORDS.iter() {
            let res = h.process(&Input::kv("k", v));
            assert!(res.error.is_none() && res.emitted.len() <= 1);
            got.push(res.emitted.first().map_or(String::new(), |e| e.output.clone()));
        }
        got.join(",")
    }

    #[test]
    fn ops() {
        for (cfg, want) in [
            (r#"{"field":"user.country","value":"NL"}"#, "out,,out,,,,,"),
            (r#"{"field":"user.country","op":"ne","value":"NL"}"#, ",out,,out,out,out,,"),
            (r#"{"field":"user.country","op":"eq","value":null}"#, ",,,out,,,,"),
            (r#"{"field":"user.country","op":"exists"}"#, "out,out,out,out,,out,,"),
            (r#"{"field":"user.age","op":"gt","value":18}"#, "out,,out,,,,,"),
            (r#"{"field":"user.age","op":"le","value":17.5}"#, ",out,,,,out,,"),
            (r#"{"field":"user.age","op":"eq","value":31.0}"#, "out,,,,,,,"),
            (r#"{"field":"user.country","op":"in","value":["DE","NL"]}"#, "out,out,out,,,,,"),
            (r#"{"field":"tags.0","op":"eq","value":"a"}"#, "out,,,,,,,"),
            (r#"{"field":"user.country","value":"NL","invalid_output":"invalid"}"#, "out,,out,,,,invalid,invalid"),
        ] {
            assert_eq!(run(cfg), want, "{}", cfg);
        }
    }

    #[test]
    fn bad_config() {
        for (cfg, want) in [
            ("", r#"filter: config: "field": required"#),
            ("[]", "filter: config: must be a JSON object, got a list"),
            (r#"{"field":"a","value":1,"op":"like"}"#, r#"filter: config: "op": must be one of"#),
            (r#"{"field":"a","value":1,"output":"nope"}"#, r#""output": output "nope" is not declared"#),
            (r#"{"field":"a","value":1,"feild":"b"}"#, r#"unknown field "feild" (known: field, invalid_output, op, output, value)"#),
        ] {
            let mut h = Host::new(super::process).outputs(&["out"]).config(cfg).init(super::init);
            let e = h.start().unwrap_err();
            assert!(e.contains(want), "{}: {}", cfg, e);
        }
    }
}
