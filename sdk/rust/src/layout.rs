//! The state layout the window and join helpers share, and share with the
//! Go SDK's sdk/window and sdk/join: keys of name, a zero byte, a tag, the
//! record key's length (u32, big-endian) and the key, then sortable times;
//! and the late-record count and route.

use crate::{abi, Error, Header, Out, Output, Record, Result, Store};

/// The tag after the name of the late-record count's key.
const TAG_COUNT: u8 = b'c';

pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A time as 8 bytes that sort in its order.
pub(crate) fn sortable(t: i64) -> [u8; 8] {
    (t as u64 ^ (1 << 63)).to_be_bytes()
}

pub(crate) fn from_sortable(b: &[u8]) -> i64 {
    (be64(b) ^ (1 << 63)) as i64
}

/// name, 0, tag, u32 key length, key, and room for `tail` more bytes,
/// which the caller appends; an error naming `what` ("window", "join")
/// and `noun` ("window key") when it would be over abi::MAX_KEY_SIZE.
pub(crate) fn record_key(what: &str, name: &str, tag: u8, key: &[u8], noun: &str, tail: usize) -> Result<Vec<u8>> {
    let n = name.len() + 1 + 1 + 4 + key.len() + tail;
    if n > abi::MAX_KEY_SIZE {
        return Err(Error::msg(format!(
            "{}: {:?}: a record key of {} bytes makes a {} over {} bytes",
            what,
            name,
            key.len(),
            noun,
            abi::MAX_KEY_SIZE
        )));
    }
    let mut k = Vec::with_capacity(n);
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    k.push(tag);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    Ok(k)
}

/// Splits a key made by record_key with a `tail`-byte tail and one of
/// `tags`: (tag, record key, tail); `None` for any other key.
pub(crate) fn parse_key<'a>(name: &str, k: &'a [u8], tags: [u8; 2], tail: usize) -> Option<(u8, &'a [u8], &'a [u8])> {
    let p = name.len() + 1;
    if k.len() < p + 1 + 4 + tail || &k[..p - 1] != name.as_bytes() || k[p - 1] != 0 {
        return None;
    }
    let tag = k[p];
    if !tags.contains(&tag) {
        return None;
    }
    let n = u32::from_be_bytes([k[p + 1], k[p + 2], k[p + 3], k[p + 4]]) as usize;
    if k.len() != p + 1 + 4 + n + tail {
        return None;
    }
    Some((tag, &k[p + 5..p + 5 + n], &k[p + 5 + n..]))
}

/// The key of the late-record count: name, 0, 'c', "late".
pub(crate) fn late_key(name: &str) -> Vec<u8> {
    let mut k = name.as_bytes().to_vec();
    k.push(0);
    k.push(TAG_COUNT);
    k.extend_from_slice(b"late");
    k
}

/// The late records counted in store (`corrupt` for a count that is not
/// 8 bytes).
pub(crate) fn late_count(store: &Store, name: &str, corrupt: impl FnOnce(&[u8]) -> Error) -> Result<u64> {
    let k = late_key(name);
    match store.get(&k)? {
        None => Ok(0),
        Some(v) if v.len() == 8 => Ok(be64(&v)),
        Some(_) => Err(corrupt(&k)),
    }
}

/// Counts a late record (its count read with late_count) and sends it as
/// it came, with the header `header` = name, to the late output if any.
pub(crate) fn late_record(
    store: &Store,
    name: &str,
    n: u64,
    out: Option<&Output>,
    header: &str,
    r: &Record<'_>,
    key: Option<&[u8]>,
) -> Result<()> {
    store.put(&late_key(name), &(n + 1).to_be_bytes())?;
    let out = match out {
        Some(o) => o,
        None => return Ok(()),
    };
    let mut hs: Vec<Header<'_>> = r.headers().collect();
    hs.push(Header { name: header.as_bytes(), value: Some(name.as_bytes()) });
    out.emit(&Out { key, value: r.value(), headers: &hs, timestamp: r.timestamp() })
}
