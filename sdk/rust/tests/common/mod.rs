//! What the tests share.

/// A small deterministic generator (splitmix64) for the random runs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }

    /// A number in [0, n).
    pub fn below(&mut self, n: i64) -> i64 {
        (self.next() % n as u64) as i64
    }
}
