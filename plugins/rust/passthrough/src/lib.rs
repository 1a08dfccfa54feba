//! passthrough: emits every input record unchanged to the output "out"
//! (key, value, headers, timestamp; the host picks the partition by key
//! hash), like plugins/passthrough in Go. It takes no config.

use wasmstream::{Output, Record, Result};

static OUT: Output = wasmstream::output!("out");

fn init() -> Result<()> {
    let c = wasmstream::config();
    let trimmed: Vec<u8> = c.iter().copied().filter(|b| !b" \t\r\n".contains(b)).collect();
    if !(trimmed.is_empty() || trimmed == b"null" || trimmed == b"{}") {
        return Err(format!("passthrough: config: takes no config; got {}", String::from_utf8_lossy(&c)).into());
    }
    OUT.check().map_err(|e| format!("passthrough: {}", e).into())
}

/// The record as it came: the SDK sends its input buffer, not a copy.
pub fn process(r: &Record) -> Result<()> {
    OUT.forward(r)
}

wasmstream::processor!(process, init);

#[cfg(test)]
mod tests {
    use wasmstream::testing::{Host, Input};

    #[test]
    fn forwards_everything() {
        let mut h = Host::new(super::process).outputs(&["out"]).init(super::init);
        h.start().unwrap();
        let rec = Input {
            key: None,
            value: Some(b"v".to_vec()),
            headers: vec![(b"h".to_vec(), None), (b"e".to_vec(), Some(vec![]))],
            timestamp: 7,
            partition: 3,
            offset: 9,
            input: 0,
        };
        let res = h.process(&rec);
        assert_eq!(res.error, None);
        let e = &res.emitted[0];
        assert_eq!((e.key.clone(), e.value.clone(), e.timestamp, e.partition), (None, Some(b"v".to_vec()), 7, -1));
        assert_eq!(e.headers, rec.headers);
    }

    #[test]
    fn refuses_config() {
        let mut h = Host::new(super::process).outputs(&["out"]).config(r#"{"x":1}"#).init(super::init);
        assert_eq!(h.start().unwrap_err(), r#"passthrough: config: takes no config; got {"x":1}"#);
    }
}
