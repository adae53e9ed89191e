//! The two text formats `/metrics` speaks, chosen by the scraper's `Accept` header.
//!
//! The metrics library writes OpenMetrics only. Prometheus asks for OpenMetrics when it can
//! read it, but `promtool check metrics`, curl and many agents read the older Prometheus text
//! format 0.0.4, in which a counter's `# HELP` and `# TYPE` carry the `_total` name of its
//! samples and there is no `# EOF`. Without a matching HELP line promtool reports every counter
//! as undocumented, so the daemon answers 0.0.4 unless OpenMetrics is asked for.

/// OpenMetrics 1.0, as the metrics library writes it.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format 0.0.4.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A text format of the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// The format for a request's `Accept` header: OpenMetrics when it names it (Prometheus
    /// does), the 0.0.4 text otherwise (no header, `text/plain`, `*/*`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let asks_openmetrics = accept.is_some_and(|accept| {
            accept.split(',').any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or("");
                let refused = parts.any(|param| {
                    param
                        .strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                });
                media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            })
        });
        if asks_openmetrics {
            Format::OpenMetrics
        } else {
            Format::PrometheusText
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::PrometheusText => PROMETHEUS_TEXT,
        }
    }

    /// `openmetrics` (the library's output) in this format.
    pub fn render(self, openmetrics: String) -> String {
        match self {
            Format::OpenMetrics => openmetrics,
            Format::PrometheusText => to_prometheus_text(&openmetrics),
        }
    }
}

/// Rewrites OpenMetrics text as Prometheus text 0.0.4: counter families take their samples'
/// `_total` name in HELP and TYPE, `# UNIT` and `# EOF` go, exemplars are cut from samples.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut lines = openmetrics.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            // The TYPE line follows the HELP line in the library's output.
            let is_counter = lines
                .peek()
                .and_then(|next| next.strip_prefix("# TYPE "))
                .and_then(|typed| typed.split_once(' '))
                .is_some_and(|(typed_name, kind)| typed_name == name && kind == "counter");
            let name = exposed_name(name, is_counter);
            out.push_str("# HELP ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(help);
            out.push('\n');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = exposed_name(name, kind == "counter");
            out.push_str("# TYPE ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
            continue;
        }
        // A sample: `name{labels} value [timestamp] [# {exemplar labels} value]`. Cut at the
        // first ` # ` after the labels (the daemon's label values never hold one).
        let body_end = line.find('}').unwrap_or(0);
        let sample = match line[body_end..].find(" # ") {
            Some(at) => &line[..body_end + at],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

fn exposed_name(name: &str, is_counter: bool) -> String {
    if is_counter && !name.ends_with("_total") {
        format!("{name}_total")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert_eq!(Format::negotiate(None), Format::PrometheusText);
        assert_eq!(
            Format::negotiate(Some("text/plain")),
            Format::PrometheusText
        );
        assert_eq!(Format::negotiate(Some("*/*")), Format::PrometheusText);
        // What Prometheus 2.x sends.
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            )),
            Format::OpenMetrics
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0, text/plain")),
            Format::PrometheusText
        );
    }

    #[test]
    fn counters_are_named_as_their_samples_and_the_trailer_goes() {
        let text = to_prometheus_text(
            "# HELP rate_limit_requests Checks decided.\n\
             # TYPE rate_limit_requests counter\n\
             rate_limit_requests_total{policy=\"a\"} 3 # {trace_id=\"x\"} 1.0\n\
             # HELP rate_limit_keys Keys tracked.\n\
             # TYPE rate_limit_keys gauge\n\
             # UNIT rate_limit_keys keys\n\
             rate_limit_keys 5\n\
             # EOF\n",
        );
        assert_eq!(
            text,
            "# HELP rate_limit_requests_total Checks decided.\n\
             # TYPE rate_limit_requests_total counter\n\
             rate_limit_requests_total{policy=\"a\"} 3\n\
             # HELP rate_limit_keys Keys tracked.\n\
             # TYPE rate_limit_keys gauge\n\
             rate_limit_keys 5\n"
        );
    }
}
