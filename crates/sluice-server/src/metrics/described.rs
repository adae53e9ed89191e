//! A metric registered so that it is described (`# HELP` / `# TYPE`) even while it has no
//! series: prometheus-client alone omits an empty family.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

#[derive(Debug)]
pub(crate) struct Described<M>(pub M);

impl<M: EncodeMetric> EncodeMetric for Described<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}
