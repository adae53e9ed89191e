//! A Prometheus histogram the check path can observe from every core at once.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation, so every check of a
//! policy, from every worker thread, queued on the same lock twice (check duration and
//! utilization) and wrote the same cache lines. Here each thread observes into a stripe of its
//! own (threads are spread over [`STRIPES`] stripes, each on cache lines of its own): an
//! observation is two atomic operations on a line that one thread writes, and a scrape sums the
//! stripes. It encodes exactly as the classic histogram does (same `_sum`, `_count`, `_bucket`
//! lines with the `+Inf` bucket).
//!
//! A sampled check's observation also keeps its trace id as the exemplar of its bucket (the
//! last one wins), under a lock only sampled observations try, and never wait for. The metrics
//! library can only write exemplars it made itself (their fields are private to it), so
//! [`with_exemplars`] writes them into its OpenMetrics text afterwards: each histogram hands
//! its exemplars to the encoding thread in the order it is encoded, and the text is walked
//! series by series in that same order.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
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

/// The trace of one sampled observation, shown next to its bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Exemplar {
    trace_id: u128,
    value: f64,
    /// When it was observed, in seconds since the Unix epoch.
    unix_secs: f64,
}

/// Per bucket (`+Inf` last), the latest exemplar.
type Exemplars = [Option<Exemplar>; MAX_BUCKETS + 1];

#[derive(Debug)]
struct Inner {
    /// Upper bounds of the finite buckets, ascending.
    bounds: &'static [f64],
    stripes: [Stripe; STRIPES],
    exemplars: Mutex<Exemplars>,
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
                exemplars: Mutex::new([None; MAX_BUCKETS + 1]),
            }),
        }
    }

    pub fn observe(&self, value: f64) {
        self.observe_bucket(value);
    }

    /// Observes `value` of the sampled trace `trace_id`, which becomes its bucket's exemplar
    /// unless another thread is writing one right now (an exemplar is a sample: losing one
    /// is better than a check waiting).
    pub fn observe_traced(&self, value: f64, trace_id: Option<u128>) {
        let bucket = self.observe_bucket(value);
        let Some(trace_id) = trace_id.filter(|_| value.is_finite()) else {
            return;
        };
        if let Some(mut exemplars) = self.inner.exemplars.try_lock() {
            let unix_secs = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            exemplars[bucket] = Some(Exemplar {
                trace_id,
                value,
                unix_secs,
            });
        }
    }

    /// Counts `value` and answers the index of its bucket.
    fn observe_bucket(&self, value: f64) -> usize {
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
        bucket
    }

    /// `(count, per-bucket counts, +Inf last)`: what the status window reads.
    pub fn counts(&self) -> (u64, Vec<u64>) {
        let (_, count, buckets) = self.snapshot();
        (count, buckets.into_iter().map(|(_, n)| n).collect())
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
        SINK.with(|sink| {
            if let Some(sink) = sink.borrow_mut().as_mut() {
                sink.push(Encoded {
                    sum,
                    exemplars: *self.inner.exemplars.lock(),
                });
            }
        });
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// What one histogram series handed over while it was encoded.
#[derive(Debug)]
struct Encoded {
    /// Its `_sum`, to recognise its lines by (a histogram of another type would hand nothing).
    sum: f64,
    exemplars: Exemplars,
}

thread_local! {
    /// Set by [`with_exemplars`] for the duration of one encoding on this thread.
    static SINK: RefCell<Option<Vec<Encoded>>> = const { RefCell::new(None) };
}

/// Runs `encode` (which writes OpenMetrics text of a registry) and adds every histogram's
/// exemplars to its bucket lines: `name_bucket{le="0.005",policy="p"} 12 # {trace_id="…"}
/// 0.0042 1700000000.123`.
pub fn with_exemplars(encode: impl FnOnce() -> String) -> String {
    SINK.with(|sink| *sink.borrow_mut() = Some(Vec::new()));
    let text = encode();
    let encoded = SINK
        .with(|sink| sink.borrow_mut().take())
        .unwrap_or_default();
    splice(text, encoded)
}

/// Appends to each `_bucket` line of `text` the exemplar `encoded` holds for it. Histograms
/// are met in the order they were encoded; each series opens with its `_sum` line.
fn splice(text: String, encoded: Vec<Encoded>) -> String {
    if encoded
        .iter()
        .all(|e| e.exemplars.iter().all(Option::is_none))
    {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 128 * encoded.len());
    let mut pending = encoded.into_iter().peekable();
    let mut histogram: Option<&str> = None;
    let mut current: Option<Exemplars> = None;
    let mut bucket = 0;
    for line in text.lines() {
        out.push_str(line);
        if let Some(typed) = line.strip_prefix("# TYPE ") {
            histogram = typed
                .split_once(' ')
                .and_then(|(name, kind)| (kind == "histogram").then_some(name));
            current = None;
        } else if let Some(after) = histogram.and_then(|name| line.strip_prefix(name)) {
            if after.starts_with("_sum") {
                let sum = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
                let ours = pending.peek().is_some_and(|e| {
                    sum.is_some_and(|s| s == e.sum || (s.is_nan() && e.sum.is_nan()))
                });
                current = if ours {
                    pending.next().map(|e| e.exemplars)
                } else {
                    None
                };
                bucket = 0;
            } else if after.starts_with("_bucket") {
                if let Some(ex) = current.and_then(|c| c.get(bucket).copied().flatten()) {
                    // Writing into a String cannot fail.
                    let _ = write!(
                        out,
                        " # {{trace_id=\"{:032x}\"}} {} {:.3}",
                        ex.trace_id, ex.value, ex.unix_secs
                    );
                }
                bucket += 1;
            }
        }
        out.push('\n');
    }
    out
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
    fn exemplars_land_on_their_series_bucket_only_when_asked_for() {
        use prometheus_client::encoding::EncodeLabelSet;
        use prometheus_client::metrics::family::Family;

        #[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
        struct Labels {
            policy: String,
        }
        let family: Family<Labels, StripedHistogram> =
            Family::new_with_constructor(|| StripedHistogram::new(&BOUNDS));
        let of = |policy: &str| Labels {
            policy: policy.to_owned(),
        };
        family.get_or_create(&of("a")).observe(0.05);
        family
            .get_or_create(&of("b"))
            .observe_traced(0.3, Some(0xabc));
        family
            .get_or_create(&of("b"))
            .observe_traced(2.0, Some(u128::MAX));
        family
            .get_or_create(&of("c"))
            .observe_traced(f64::NAN, Some(1));
        let mut registry = Registry::default();
        registry.register("h", "help", family);
        let encode = || {
            let mut out = String::new();
            encode(&mut out, &registry).unwrap();
            out
        };
        let plain = encode();
        assert!(!plain.contains(" # {"), "{plain}");
        let text = with_exemplars(encode);
        let with: Vec<&str> = text.lines().filter(|l| l.contains(" # {")).collect();
        assert_eq!(with.len(), 2, "{text}");
        assert!(
            with[0].starts_with(
                "h_bucket{le=\"0.5\",policy=\"b\"} 1 # {trace_id=\"00000000000000000000000000000abc\"} 0.3 "
            ),
            "{text}"
        );
        assert!(
            with[1].starts_with(&format!(
                "h_bucket{{le=\"+Inf\",policy=\"b\"}} 2 # {{trace_id=\"{}\"}} 2 ",
                "f".repeat(32)
            )),
            "{text}"
        );
        // Everything else is the library's text, unchanged.
        let cut: String = text
            .lines()
            .map(|l| l.split(" # {").next().unwrap_or(l).to_owned() + "\n")
            .collect();
        assert_eq!(cut, plain);
        // No encoding in progress: nothing is collected.
        assert!(SINK.with(|sink| sink.borrow().is_none()));
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
