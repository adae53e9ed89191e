//! The two charts of each (policy, tier), drawn by `plotters` into SVG text (its SVG backend
//! only: text stays `<text>` elements, so no font files are needed and the page stays one
//! self-contained file): the 429 rate over time for the limit and the candidate, and the
//! distribution of per-key peak rates with the limit and the suggested limit marked.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::format::window_text;
use super::model::PolicyReport;
use crate::error::Error;
use crate::stats::TimeBucket;
use crate::time::{format_clock, format_utc_seconds};

/// Chart size in SVG pixels (the page scales it to its column).
const SIZE: (u32, u32) = (640, 300);
/// The limit's colour, the candidate's, the suggestion's, the bars'.
const LIMIT: RGBColor = RGBColor(0xd6, 0x45, 0x3d);
const CANDIDATE: RGBColor = RGBColor(0xe0, 0x8e, 0x0b);
const SUGGESTED: RGBColor = RGBColor(0x1f, 0x9d, 0x55);
const BARS: RGBColor = RGBColor(0x4a, 0x78, 0xc2);
const FONT: &str = "sans-serif";
/// Bars of the peak-rate histogram at most.
const MAX_BARS: u64 = 40;

fn chart_error(error: impl std::fmt::Display) -> Error {
    Error::Chart(error.to_string())
}

/// Share of requests rejected per time bucket, in percent.
pub(crate) fn rejections_over_time(row: &PolicyReport) -> Result<String, Error> {
    let timeline = &row.timeline;
    let width = timeline.width_ms as f64;
    let start = timeline.start_ms as f64;
    let end = start + width * timeline.buckets.len().max(1) as f64;
    let points = |pick: fn(&TimeBucket) -> u64| -> Vec<(f64, f64)> {
        timeline
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, bucket)| bucket.requests > 0)
            .map(|(i, bucket)| {
                (
                    start + width * (i as f64 + 0.5),
                    pick(bucket) as f64 * 100.0 / bucket.requests as f64,
                )
            })
            .collect()
    };
    let limit_points = points(|b| b.rejected);
    let candidate_points = row
        .candidate
        .as_ref()
        .map(|_| points(|b| b.candidate_rejected));
    let highest = limit_points
        .iter()
        .chain(candidate_points.iter().flatten())
        .map(|(_, y)| *y)
        .fold(0.0f64, f64::max);
    let y_max = (highest * 1.15).clamp(1.0, 100.0);
    let long_span = end - start > 86_400_000.0;

    let clock = |x: &f64| {
        if long_span {
            format_utc_seconds(*x as u64)[5..16].to_owned()
        } else {
            format_clock(*x as u64)
        }
    };
    let axes = Axes {
        x_desc: format!("time (UTC), {} per point", window_text(timeline.width_ms)),
        y_desc: "rejected (429)",
        x_labels: 6,
        x_format: &clock,
        y_format: &|y| format!("{y:.1} %"),
    };
    svg_chart(start..end, 0f64..y_max, &axes, |chart| {
        draw_line(chart, limit_points, LIMIT, "limit")?;
        if let Some(points) = candidate_points {
            draw_line(chart, points, CANDIDATE, "candidate")?;
        }
        Ok(())
    })
}

/// Axis descriptions and label formats of a chart.
struct Axes<'f> {
    x_desc: String,
    y_desc: &'static str,
    x_labels: usize,
    x_format: &'f dyn Fn(&f64) -> String,
    y_format: &'f dyn Fn(&f64) -> String,
}

/// An SVG chart over `x` × `y` in the page's frame, mesh and legend; `draw` adds the series.
fn svg_chart<X, Y>(
    x: X,
    y: Y,
    axes: &Axes<'_>,
    draw: impl FnOnce(
        &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X::CoordDescType, Y::CoordDescType>>,
    ) -> Result<(), Error>,
) -> Result<String, Error>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .margin_right(34)
            .x_label_area_size(42)
            .y_label_area_size(66)
            .build_cartesian_2d(x, y)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_labels(axes.x_labels)
            .y_labels(6)
            .x_label_formatter(axes.x_format)
            .y_label_formatter(axes.y_format)
            .x_desc(axes.x_desc.as_str())
            .y_desc(axes.y_desc)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .light_line_style(RGBColor(0xf4, 0xf4, 0xf4))
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .draw()
            .map_err(chart_error)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0xcc, 0xcc, 0xcc))
            .label_font((FONT, 13))
            .draw()
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A labelled line; its points also marked when there are too few to draw a line.
fn draw_line(
    chart: &mut Chart<'_, '_>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    label: &str,
) -> Result<(), Error> {
    let few = points.len() < 3;
    let marks = if few { points.clone() } else { Vec::new() };
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(chart_error)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
    chart
        .draw_series(marks.into_iter().map(|p| Circle::new(p, 3, color.filled())))
        .map_err(chart_error)?;
    Ok(())
}

/// How many keys peaked at each rate (bars, keys on a log scale), with the limit and the
/// suggested limit as vertical lines.
pub(crate) fn peak_distribution(row: &PolicyReport) -> Result<String, Error> {
    let highest_peak = row.peaks.last().copied().unwrap_or(0);
    let top = highest_peak
        .max(row.limit.limit)
        .max(row.suggested_limit.unwrap_or(0))
        + 1;
    let bar = top.div_ceil(MAX_BARS).max(1);
    let mut bins = vec![0u64; top.div_ceil(bar) as usize + 1];
    for peak in &row.peaks {
        bins[(*peak / bar) as usize] += 1;
    }
    let most = bins.iter().copied().max().unwrap_or(0).max(1);
    let x_max = (bins.len() as u64 * bar) as f64;
    let y_top = most as f64 * 1.6;
    let axes = Axes {
        x_desc: format!(
            "peak requests per {} window, per key",
            window_text(row.limit.window_ms)
        ),
        y_desc: "keys (log scale)",
        x_labels: 8,
        x_format: &|x| format!("{x:.0}"),
        y_format: &|y| format!("{y:.0}"),
    };
    svg_chart(0f64..x_max, (0.8f64..y_top).log_scale(), &axes, |chart| {
        chart
            .draw_series(
                bins.iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| {
                        let x0 = (i as u64 * bar) as f64;
                        Rectangle::new(
                            [(x0, 0.8), (x0 + bar as f64 * 0.9, *n as f64)],
                            BARS.mix(0.85).filled(),
                        )
                    }),
            )
            .map_err(chart_error)?
            .label("keys")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], BARS.filled()));
        let mut mark = |at: u64, color: RGBColor, label: String| -> Result<(), Error> {
            let x = at as f64 + 0.5;
            chart
                .draw_series(LineSeries::new(
                    vec![(x, 0.8), (x, y_top)],
                    color.stroke_width(2),
                ))
                .map_err(chart_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
            Ok(())
        };
        mark(row.limit.limit, LIMIT, format!("limit {}", row.limit.limit))?;
        if let Some(suggested) = row.suggested_limit {
            mark(suggested, SUGGESTED, format!("suggested {suggested}"))?;
        }
        if let Some(candidate) = &row.candidate {
            mark(
                candidate.limit.limit,
                CANDIDATE,
                format!("candidate {}", candidate.limit.limit),
            )?;
        }
        Ok(())
    })
}
