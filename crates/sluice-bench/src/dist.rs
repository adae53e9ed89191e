//! Which key each request names: one hot key, uniform over N keys, Zipf (s = 1) over N keys,
//! drawn with sluice-core's `SplitMix` so a draw costs a few nanoseconds, or every key in turn
//! (`sequential`: fills a daemon's table before a measured run over many keys).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use sluice_core::SplitMix;

/// The `--dist` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistKind {
    Hot,
    Uniform,
    Zipf,
    Sequential,
}

impl FromStr for DistKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hot" => Ok(DistKind::Hot),
            "uniform" => Ok(DistKind::Uniform),
            "zipf" => Ok(DistKind::Zipf),
            "sequential" => Ok(DistKind::Sequential),
            other => Err(format!(
                "unknown distribution {other:?}: hot, uniform, zipf or sequential"
            )),
        }
    }
}

impl fmt::Display for DistKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DistKind::Hot => "hot",
            DistKind::Uniform => "uniform",
            DistKind::Zipf => "zipf",
            DistKind::Sequential => "sequential",
        })
    }
}

/// A key distribution over `0..keys`, shared (read-only) by every connection.
#[derive(Debug, Clone)]
pub enum Dist {
    /// Always key 0.
    Hot,
    Uniform {
        keys: u64,
    },
    /// `cdf[i]` = P(rank <= i) for P(rank = i) proportional to 1 / (i + 1)^s.
    Zipf {
        cdf: Arc<[f64]>,
    },
    /// Keys `next`, `next + step`, ... modulo `keys`: with one cursor per connection
    /// ([`Dist::for_connection`]), every key is named once before any is named twice.
    Sequential {
        keys: u64,
        next: u64,
        step: u64,
    },
}

impl Dist {
    /// The distribution of `kind` over `keys` keys (at least 1). Zipf precomputes its CDF
    /// (8 bytes per key).
    pub fn new(kind: DistKind, keys: u64) -> Self {
        let keys = keys.max(1);
        match kind {
            DistKind::Hot => Dist::Hot,
            DistKind::Uniform => Dist::Uniform { keys },
            DistKind::Zipf => Dist::zipf(keys, 1.0),
            DistKind::Sequential => Dist::Sequential {
                keys,
                next: 0,
                step: 1,
            },
        }
    }

    /// The distribution as connection `slot` of `connections` draws from it: a sequential
    /// walk starts at `slot` and strides by `connections`; the others are shared as they are.
    pub fn for_connection(&self, slot: u64, connections: u64) -> Self {
        match self {
            Dist::Sequential { keys, .. } => Dist::Sequential {
                keys: *keys,
                next: slot % keys,
                step: connections.max(1),
            },
            other => other.clone(),
        }
    }

    /// Zipf with exponent `s` over `keys` ranks.
    pub fn zipf(keys: u64, s: f64) -> Self {
        let n = usize::try_from(keys.max(1)).unwrap_or(usize::MAX);
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0f64;
        for rank in 1..=n {
            #[allow(clippy::cast_precision_loss)]
            let weight = 1.0 / (rank as f64).powf(s);
            sum += weight;
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Dist::Zipf { cdf: cdf.into() }
    }

    /// How many distinct keys it can name.
    pub fn keys(&self) -> u64 {
        match self {
            Dist::Hot => 1,
            Dist::Uniform { keys } => *keys,
            Dist::Zipf { cdf } => cdf.len() as u64,
            Dist::Sequential { keys, .. } => *keys,
        }
    }

    /// The next key index, in `0..self.keys()`.
    pub fn sample(&mut self, rng: &mut SplitMix) -> u64 {
        match self {
            Dist::Hot => 0,
            Dist::Uniform { keys } => rng.below(*keys),
            Dist::Zipf { cdf } => {
                let u = rng.unit();
                let at = cdf.partition_point(|&c| c <= u);
                at.min(cdf.len() - 1) as u64
            }
            Dist::Sequential { keys, next, step } => {
                let key = *next;
                *next = (*next + *step) % *keys;
                key
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(dist: &Dist, draws: usize) -> Vec<u64> {
        let mut dist = dist.clone();
        let mut rng = SplitMix(7);
        let mut counts = vec![0u64; usize::try_from(dist.keys()).unwrap()];
        for _ in 0..draws {
            let k = dist.sample(&mut rng);
            counts[usize::try_from(k).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn hot_is_always_key_zero() {
        let dist = Dist::new(DistKind::Hot, 1000);
        assert_eq!(dist.keys(), 1);
        assert_eq!(histogram(&dist, 1000), vec![1000]);
    }

    #[test]
    fn uniform_covers_every_key_evenly() {
        let dist = Dist::new(DistKind::Uniform, 10);
        let counts = histogram(&dist, 100_000);
        for (key, &n) in counts.iter().enumerate() {
            assert!((9_000..11_000).contains(&n), "key {key}: {n}");
        }
    }

    #[test]
    fn zipf_frequencies_fall_as_one_over_rank() {
        let dist = Dist::new(DistKind::Zipf, 100);
        let counts = histogram(&dist, 200_000);
        // H(100) ~ 5.187: rank 1 gets ~19.3 %, rank 2 half of that, rank 10 a tenth.
        let p1 = counts[0] as f64 / 200_000.0;
        assert!((0.18..0.205).contains(&p1), "p1 = {p1}");
        let ratio2 = counts[0] as f64 / counts[1] as f64;
        assert!((1.8..2.2).contains(&ratio2), "rank1/rank2 = {ratio2}");
        let ratio10 = counts[0] as f64 / counts[9] as f64;
        assert!((8.5..11.5).contains(&ratio10), "rank1/rank10 = {ratio10}");
        assert!(counts[99] > 0, "the tail is reached");
    }

    #[test]
    fn zipf_cdf_is_monotonic_and_ends_at_one() {
        let Dist::Zipf { cdf } = Dist::new(DistKind::Zipf, 1000) else {
            panic!("not zipf");
        };
        assert!(cdf.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(cdf.last().copied(), Some(1.0));
    }

    #[test]
    fn sequential_connections_name_every_key_once_before_any_twice() {
        let dist = Dist::new(DistKind::Sequential, 10);
        let mut rng = SplitMix(1);
        let mut connections: Vec<Dist> = (0..3).map(|c| dist.for_connection(c, 3)).collect();
        // Round robin over the connections, as concurrent requests interleave.
        let mut first: Vec<u64> = (0..10)
            .map(|i| connections[i % 3].sample(&mut rng))
            .collect();
        first.sort_unstable();
        assert_eq!(first, (0..10).collect::<Vec<u64>>());
    }

    #[test]
    fn below_and_unit_stay_in_range() {
        let mut rng = SplitMix(1);
        for n in [1u64, 2, 3, 1_000_000] {
            for _ in 0..1000 {
                assert!(rng.below(n) < n);
            }
        }
        for _ in 0..1000 {
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn kinds_parse_from_their_names() {
        for kind in [
            DistKind::Hot,
            DistKind::Uniform,
            DistKind::Zipf,
            DistKind::Sequential,
        ] {
            assert_eq!(kind.to_string().parse::<DistKind>(), Ok(kind));
        }
        assert!("normal".parse::<DistKind>().is_err());
    }
}
