//! A count-min sketch: fixed memory, counts of any number of keys, overestimating by at most
//! `e / WIDTH` of the total with probability `1 - e^-DEPTH`.

/// Counters per row. One sketch serves one stripe of a policy's keys (`super::STRIPES` of
/// them), so together the stripes hold 1024 counters per row.
pub const WIDTH: usize = 128;
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

/// Per-row seeds, so each row hashes independently of the others.
const ROW_SEEDS: [u64; DEPTH] = [
    0x243F_6A88_85A3_08D3,
    0x1319_8A2E_0370_7344,
    0xA409_3822_299F_31D0,
    0x082E_FA98_EC4E_6C89,
];

/// The column of `hash` in `row`. Each row remixes the key's hash with its own seed (the
/// splitmix64 finaliser): double hashing from one hash made two keys that share the low bits
/// of both halves collide in every row at once, so a light key could inherit a heavy key's
/// count and enter the top list.
fn column(hash: u64, row: usize) -> usize {
    let mut z = hash ^ ROW_SEEDS[row];
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % WIDTH as u64) as usize
}

/// A key's cell in every row, computed once per key and used on every sketch it touches
/// (a check adds to two slots, and maybe to their rejection sketches too).
#[derive(Debug, Clone, Copy)]
pub struct Cells([usize; DEPTH]);

impl Cells {
    pub fn of(hash: u64) -> Cells {
        Cells(std::array::from_fn(|row| column(hash, row)))
    }
}

impl CountMin {
    /// Adds `count` to the key of `cells` and returns its new estimate.
    pub fn add(&mut self, cells: &Cells, count: u32) -> u32 {
        self.total += u64::from(count);
        let mut estimate = u32::MAX;
        for (counters, &at) in self.rows.iter_mut().zip(&cells.0) {
            let cell = &mut counters[at];
            *cell = cell.saturating_add(count);
            estimate = estimate.min(*cell);
        }
        estimate
    }

    pub fn estimate(&self, cells: &Cells) -> u32 {
        self.rows
            .iter()
            .zip(&cells.0)
            .map(|(counters, &at)| counters[at])
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
            sketch.add(&Cells::of(hash(i % 5000)), 1);
        }
        let bound = sketch.error_bound();
        let mut over = 0;
        for i in 0..5000 {
            let estimate = u64::from(sketch.estimate(&Cells::of(hash(i))));
            assert!(estimate >= 4);
            if estimate - 4 > bound {
                over += 1;
            }
        }
        // The bound holds per key with probability 1 - e^-4 (98%).
        assert!(over < 5000 / 20, "{over} keys past the bound");
    }
}
