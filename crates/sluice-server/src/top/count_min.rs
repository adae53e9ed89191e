//! A count-min sketch: fixed memory, counts of any number of keys, overestimating by at most
//! `e / WIDTH` of the total with probability `1 - e^-DEPTH`.

/// Counters per row.
pub const WIDTH: usize = 1024;
/// Rows, each with its own hash.
pub const DEPTH: usize = 4;

#[derive(Debug, Clone)]
pub struct CountMin {
    rows: Box<[[u32; WIDTH]; DEPTH]>,
    total: u64,
}

impl Default for CountMin {
    fn default() -> Self {
        CountMin {
            rows: Box::new([[0; WIDTH]; DEPTH]),
            total: 0,
        }
    }
}

/// The column of `hash` in `row` (double hashing from one 64-bit hash).
fn column(hash: u64, row: usize) -> usize {
    let (h1, h2) = (hash as u32, (hash >> 32) as u32 | 1);
    (h1.wrapping_add((row as u32).wrapping_mul(h2)) as usize) % WIDTH
}

impl CountMin {
    /// Adds `count` to the key of `hash` and returns its new estimate.
    pub fn add(&mut self, hash: u64, count: u32) -> u32 {
        self.total += u64::from(count);
        let mut estimate = u32::MAX;
        for (row, counters) in self.rows.iter_mut().enumerate() {
            let cell = &mut counters[column(hash, row)];
            *cell = cell.saturating_add(count);
            estimate = estimate.min(*cell);
        }
        estimate
    }

    pub fn estimate(&self, hash: u64) -> u32 {
        self.rows
            .iter()
            .enumerate()
            .map(|(row, counters)| counters[column(hash, row)])
            .min()
            .unwrap_or(0)
    }

    /// Everything added.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Adds `other`'s counts (same hashing), so periods can be combined.
    pub fn merge(&mut self, other: &CountMin) {
        self.total += other.total;
        for (mine, theirs) in self.rows.iter_mut().zip(other.rows.iter()) {
            for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                *a = a.saturating_add(*b);
            }
        }
    }

    pub fn clear(&mut self) {
        self.total = 0;
        for row in self.rows.iter_mut() {
            row.fill(0);
        }
    }

    /// The overestimate bound at this total: `ceil(e / WIDTH * total)`.
    pub fn error_bound(&self) -> u64 {
        (std::f64::consts::E / WIDTH as f64 * self.total as f64).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_underestimates_and_stays_within_the_bound() {
        let mut sketch = CountMin::default();
        let hash = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 29);
        for i in 0..20_000u64 {
            sketch.add(hash(i % 5000), 1);
        }
        let bound = sketch.error_bound();
        let mut over = 0;
        for i in 0..5000 {
            let estimate = u64::from(sketch.estimate(hash(i)));
            assert!(estimate >= 4);
            if estimate - 4 > bound {
                over += 1;
            }
        }
        // The bound holds per key with probability 1 - e^-4 (98%).
        assert!(over < 5000 / 20, "{over} keys past the bound");
    }
}
