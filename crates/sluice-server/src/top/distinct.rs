//! A HyperLogLog: the number of distinct keys seen, in 1 KiB whatever their number
//! (standard error about 3%), mergeable by taking register maxima.

const PRECISION: u32 = 10;
const REGISTERS: usize = 1 << PRECISION;

#[derive(Debug, Clone)]
pub struct Distinct {
    registers: Box<[u8; REGISTERS]>,
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct {
            registers: Box::new([0; REGISTERS]),
        }
    }
}

impl Distinct {
    pub fn insert(&mut self, hash: u64) {
        let index = (hash >> (64 - PRECISION)) as usize;
        let rest = (hash << PRECISION) | (1 << (PRECISION - 1));
        let rank = rest.leading_zeros() as u8 + 1;
        let register = &mut self.registers[index];
        *register = (*register).max(rank);
    }

    pub fn merge(&mut self, other: &Distinct) {
        for (a, b) in self.registers.iter_mut().zip(other.registers.iter()) {
            *a = (*a).max(*b);
        }
    }

    /// Estimated number of distinct keys inserted.
    pub fn count(&self) -> f64 {
        let m = REGISTERS as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self
            .registers
            .iter()
            .map(|&r| 2f64.powi(-i32::from(r)))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        if raw <= 2.5 * m && zeros > 0 {
            // Small ranges: linear counting is exact enough and unbiased.
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u64) -> u64 {
        ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(i)
    }

    #[test]
    fn counts_distinct_keys_within_a_few_percent() {
        for n in [10u64, 1000, 100_000] {
            let mut hll = Distinct::default();
            for i in 0..n {
                hll.insert(hash(i));
                hll.insert(hash(i));
            }
            let error = (hll.count() - n as f64).abs() / n as f64;
            assert!(error < 0.1, "{n}: estimated {}", hll.count());
        }
    }

    #[test]
    fn merging_is_a_union() {
        let (mut a, mut b) = (Distinct::default(), Distinct::default());
        for i in 0..5000 {
            a.insert(hash(i));
            b.insert(hash(i + 2500));
        }
        a.merge(&b);
        let error = (a.count() - 7500.0).abs() / 7500.0;
        assert!(error < 0.1, "{}", a.count());
    }
}
