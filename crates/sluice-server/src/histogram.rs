//! A Prometheus histogram the check path can observe from every core at once.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation, so every check of a
//! policy, from every worker thread, queued on the same lock twice (check duration and
//! utilization) and wrote the same cache lines. Here each thread observes into a stripe of its
//! own (threads are spread over [`STRIPES`] stripes, each on cache lines of its own): an
//! observation is two atomic operations on a line that one thread writes, and a scrape sums the
//! stripes. It encodes exactly as the classic histogram does (same `_sum`, `_count`, `_bucket`
//! lines with the `+Inf` bucket).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Most finite buckets a histogram may have (the `+Inf` bucket comes on top).
pub const MAX_BUCKETS: usize = 15;

/// Stripes per histogram: more than the worker threads of most hosts need to rarely share one.
const STRIPES: usize = 8;

/// The stripe of the calling thread, given out in turn to threads as they first observe.
fn stripe_of_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

/// One thread's share: per-bucket (not cumulative) counts and the sum of what it observed.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    counts: [AtomicU64; MAX_BUCKETS + 1],
    /// An `f64`, as its bits.
    sum: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds of the finite buckets, ascending.
    bounds: &'static [f64],
    stripes: [Stripe; STRIPES],
}

/// A classic Prometheus histogram over fixed buckets, observed without a lock. Clones share
/// their values (as prometheus-client's metrics do).
#[derive(Debug, Clone)]
pub struct StripedHistogram {
    inner: Arc<Inner>,
}

impl StripedHistogram {
    /// A histogram over `bounds` (ascending, finite). Bounds past [`MAX_BUCKETS`] are
    /// dropped: the bucket sets are constants, checked at compile time in `metrics`.
    pub fn new(bounds: &'static [f64]) -> Self {
        StripedHistogram {
            inner: Arc::new(Inner {
                bounds: &bounds[..bounds.len().min(MAX_BUCKETS)],
                stripes: Default::default(),
            }),
        }
    }

    pub fn observe(&self, value: f64) {
        let inner = &*self.inner;
        // The first bucket whose bound is at least `value`; NaN and values above every bound
        // land in `+Inf`, as in the classic histogram.
        let bucket = inner.bounds.partition_point(|bound| *bound < value);
        let bucket = if value.is_nan() {
            inner.bounds.len()
        } else {
            bucket
        };
        let stripe = &inner.stripes[stripe_of_this_thread()];
        stripe.counts[bucket].fetch_add(1, Ordering::Relaxed);
        // Only this stripe's threads write its sum, so the loop rarely runs twice.
        let _ = stripe
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    /// `(sum, count, per-bucket counts with their upper bounds, +Inf last)`.
    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let inner = &*self.inner;
        let mut buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .map(|bound| (bound, 0))
            .collect();
        let mut sum = 0.0;
        for stripe in &inner.stripes {
            sum += f64::from_bits(stripe.sum.load(Ordering::Relaxed));
            for (bucket, count) in buckets.iter_mut().zip(&stripe.counts) {
                bucket.1 += count.load(Ordering::Relaxed);
            }
        }
        let count = buckets.iter().map(|b| b.1).sum();
        (sum, count, buckets)
    }
}

impl TypedMetric for StripedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for StripedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    use super::*;

    const BOUNDS: [f64; 3] = [0.1, 0.5, 1.0];

    fn text(register: impl FnOnce(&mut Registry)) -> String {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn encodes_as_the_classic_histogram_does() {
        let values = [0.05, 0.1, 0.3, 0.7, 1.0, 2.0, f64::NAN, 0.0];
        let ours = StripedHistogram::new(&BOUNDS);
        let classic = Histogram::new(BOUNDS);
        for v in values.iter().filter(|v| !v.is_nan()) {
            ours.observe(*v);
            classic.observe(*v);
        }
        let a = text(|r| r.register("h", "help", ours.clone()));
        let b = text(|r| r.register("h", "help", classic.clone()));
        assert_eq!(a, b);
        assert!(a.contains("h_bucket{le=\"+Inf\"} 7"), "{a}");
        // NaN is counted in +Inf (its sum is NaN in both).
        ours.observe(f64::NAN);
        assert!(text(|r| r.register("h", "help", ours)).contains("h_count 8"));
    }

    #[test]
    fn every_thread_is_counted() {
        let h = StripedHistogram::new(&BOUNDS);
        std::thread::scope(|scope| {
            for _ in 0..12 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        h.observe(0.25);
                    }
                });
            }
        });
        let (sum, count, buckets) = h.snapshot();
        assert_eq!(count, 12_000);
        assert_eq!(buckets[1], (0.5, 12_000));
        assert!((sum - 3000.0).abs() < 1e-6, "{sum}");
    }
}
