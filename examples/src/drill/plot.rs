//! [`DrillReport::svg`]: the drill as a picture, one panel per layout, calls per second by
//! outcome over the run, the calls in flight at the downstream, and the time the breaker
//! refused calls shaded.
//!
//! Written as SVG by hand rather than with `plotters`: plotters lays its text out with a font
//! it has to load (the system's through font-kit, which needs fontconfig to build, or a font
//! file kept in the repository), while an SVG names its font and lets the viewer draw it. The
//! picture is a few polylines, rectangles and labels.

use std::fmt::Write as _;

use resilience_runtime::CircuitState;

use std::time::Duration;

use super::report::{DrillReport, RunReport, Sample};

const WIDTH: f64 = 960.0;
const PANEL: f64 = 170.0;
const TOP: f64 = 72.0;
const LEFT: f64 = 64.0;
/// Room for the in-flight scale on the right.
const RIGHT: f64 = 48.0;
const PLOT_HEIGHT: f64 = 110.0;
/// The colour of the calls in flight.
const IN_FLIGHT: &str = "#1565c0";
/// The colour of an adaptive limit.
const LIMIT: &str = "#6a1b9a";
/// Samples averaged for a rate (about half a second).
const SMOOTHING: usize = 5;

/// A series: its label, its colour, and what it counts in a sample.
type Series = (&'static str, &'static str, fn(&Sample) -> u64);

/// The series, each an outcome of a call.
const SERIES: [Series; 4] = [
    ("succeeded", "#2e7d32", |s| s.counts.succeeded),
    ("shed by the bulkhead or the rate limiter", "#ef6c00", |s| {
        s.counts.rejected_bulkhead + s.counts.rate_limited
    }),
    ("refused by the breaker", "#c62828", |s| {
        s.counts.not_permitted
    }),
    ("failed or timed out", "#616161", |s| {
        s.counts.failed + s.counts.timed_out
    }),
];

impl DrillReport {
    /// The drill as an SVG image: one panel per layout, in the order they ran, each the calls
    /// per second that ended in each outcome (averaged over half a second), on one logarithmic
    /// scale for every panel (a refused call returns at once, so refusals run at ten times the
    /// rate of successes), with the time the breaker was open shaded red (half-open: yellow),
    /// and the calls in flight at the downstream (queued or served) on a linear scale on the
    /// right: what the bulkhead bounds, and what piles up without it.
    pub fn svg(&self) -> String {
        let panels: Vec<&dyn Panel> = self.runs.iter().map(|r| r as &dyn Panel).collect();
        draw(
            &format!(
                "overload drill: the same load against each layout ({} callers, seed {})",
                self.config.callers, self.config.seed
            ),
            &panels,
        )
    }
}

/// One panel of a picture: a run's timeline and its labels.
pub(crate) trait Panel {
    /// The bold title.
    fn title(&self) -> String;
    /// What follows the title, in grey.
    fn caption(&self) -> String;
    /// The samples, in time order.
    fn timeline(&self) -> &[Sample];
    /// When the offered load ended (a dashed line).
    fn load_ends(&self) -> Duration;
    /// When the run ended, its calls drained.
    fn elapsed(&self) -> Duration;
    /// Whether the bulkhead's limit moves (an adaptive limit: drawn on the right-hand scale).
    fn draws_limit(&self) -> bool;
}

impl Panel for RunReport {
    fn title(&self) -> String {
        self.layout.name()
    }
    fn caption(&self) -> String {
        format!("{:.0} ok/s · {}", self.throughput(), self.layout.describe())
    }
    fn timeline(&self) -> &[Sample] {
        &self.timeline
    }
    fn load_ends(&self) -> Duration {
        self.duration
    }
    fn elapsed(&self) -> Duration {
        self.elapsed
    }
    fn draws_limit(&self) -> bool {
        self.layout.is_adaptive()
    }
}

/// `panels` as an SVG image under `title`: each the calls per second that ended in each
/// outcome, on one logarithmic scale for every panel, the breaker's open time shaded, the
/// calls in flight at the downstream (and a moving limit) on a linear scale on the right.
pub(crate) fn draw(title: &str, panels: &[&dyn Panel]) -> String {
    let rates: Vec<Vec<Vec<(f64, f64)>>> = panels.iter().map(|p| rates_of(p.timeline())).collect();
    let top_rate = rates
        .iter()
        .flatten()
        .flatten()
        .map(|&(_, rate)| rate)
        .fold(1.0, f64::max);
    let y_max = power_ceiling(top_rate);
    let x_max = panels
        .iter()
        .map(|p| p.elapsed().as_secs_f64())
        .fold(1.0, f64::max);
    // A moving limit is drawn on the same scale as the calls in flight.
    let in_flight_max = nice_ceiling(
        panels
            .iter()
            .flat_map(|p| {
                let limit = p.draws_limit();
                p.timeline()
                    .iter()
                    .map(move |s| s.in_flight.max(if limit { u64::from(s.limit) } else { 0 }))
            })
            .max()
            .unwrap_or(0),
    );
    let height = TOP + PANEL * panels.len() as f64 + 8.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>
"##,
        escape(title)
    );
    let mut x = LEFT;
    for (label, colour, _) in SERIES {
        let _ = writeln!(
            svg,
            r#"<rect x="{x}" y="32" width="14" height="4" fill="{colour}"/><text x="{}" y="38">{label}</text>"#,
            x + 18.0
        );
        x += 30.0 + 6.5 * label.len() as f64;
    }
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="52" x2="{}" y2="52" stroke="{IN_FLIGHT}" stroke-width="1.5" stroke-dasharray="5 2"/><text x="{}" y="56">calls in flight at the downstream (right scale)</text>
<rect x="{}" y="47" width="14" height="10" fill="#ffcdd2"/><text x="{}" y="56">breaker open</text>
<rect x="{}" y="47" width="14" height="10" fill="#fff3c4"/><text x="{}" y="56">half-open</text>"##,
        LEFT + 14.0,
        LEFT + 18.0,
        LEFT + 340.0,
        LEFT + 358.0,
        LEFT + 460.0,
        LEFT + 478.0,
    );
    if panels.iter().any(|p| p.draws_limit()) {
        let _ = writeln!(
            svg,
            r#"<line x1="{}" y1="52" x2="{}" y2="52" stroke="{LIMIT}" stroke-width="1.5"/><text x="{}" y="56">adaptive limit (right scale)</text>"#,
            LEFT + 560.0,
            LEFT + 574.0,
            LEFT + 578.0,
        );
    }
    let scales = Scales {
        x_max,
        y_max,
        in_flight_max,
    };
    for (i, (run, series)) in panels.iter().zip(&rates).enumerate() {
        panel(&mut svg, TOP + PANEL * i as f64, *run, series, &scales);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Per series, `(seconds, calls per second)` points of a timeline.
fn rates_of(samples: &[Sample]) -> Vec<Vec<(f64, f64)>> {
    SERIES
        .iter()
        .map(|(_, _, count)| {
            (SMOOTHING..samples.len())
                .map(|i| {
                    let (from, to) = (&samples[i - SMOOTHING], &samples[i]);
                    let seconds = (to.elapsed - from.elapsed).as_secs_f64().max(1e-9);
                    let calls = count(to).saturating_sub(count(from)) as f64;
                    let middle = (from.elapsed + to.elapsed).as_secs_f64() / 2.0;
                    (middle, calls / seconds)
                })
                .collect()
        })
        .collect()
}

/// The lowest rate the scale shows; below it, a line runs along the bottom. One call in half a
/// second (2/s) is above it: a series of a few failures stays in sight.
const FLOOR: f64 = 1.0;

/// The first of 10, 20, 50, 100, 200, … at or above `value`.
fn nice_ceiling(value: u64) -> u64 {
    let mut step: u64 = 10;
    loop {
        for nice in [step, 2 * step, 5 * step] {
            if value <= nice {
                return nice;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// The scales every panel shares: seconds, calls per second, calls in flight.
struct Scales {
    x_max: f64,
    y_max: f64,
    in_flight_max: u64,
}

/// The power of ten at or above `value`, at least 100.
fn power_ceiling(value: f64) -> f64 {
    10f64.powf(value.log10().ceil()).max(100.0)
}

fn panel(svg: &mut String, top: f64, run: &dyn Panel, series: &[Vec<(f64, f64)>], scales: &Scales) {
    let Scales {
        x_max,
        y_max,
        in_flight_max,
    } = *scales;
    let plot_top = top + 24.0;
    let plot_width = WIDTH - LEFT - RIGHT;
    let x_of = |seconds: f64| LEFT + plot_width * seconds / x_max;
    let decades = (y_max / FLOOR).log10();
    let y_of =
        |rate: f64| plot_top + PLOT_HEIGHT * (1.0 - (rate.max(FLOOR) / FLOOR).log10() / decades);
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="{}" font-weight="bold">{}</text><text x="{}" y="{}" fill="#555555" font-size="11">{}</text>"##,
        top + 14.0,
        escape(&run.title()),
        // After the title, which is bold: about 7.5 px a character.
        LEFT + 160f64.max(7.5 * run.title().chars().count() as f64 + 16.0),
        top + 14.0,
        escape(&run.caption())
    );
    // The breaker's refusing spans, from the samples' states.
    let mut span: Option<(f64, &str)> = None;
    let close = |svg: &mut String, from: f64, to: f64, fill: &str| {
        let _ = writeln!(
            svg,
            r#"<rect x="{:.1}" y="{plot_top}" width="{:.1}" height="{PLOT_HEIGHT}" fill="{fill}"/>"#,
            x_of(from),
            (x_of(to) - x_of(from)).max(0.5)
        );
    };
    for sample in run.timeline() {
        let t = sample.elapsed.as_secs_f64();
        let fill = match sample.breaker {
            CircuitState::Open | CircuitState::ForcedOpen => Some("#ffcdd2"),
            CircuitState::HalfOpen => Some("#fff3c4"),
            CircuitState::Closed | CircuitState::Disabled | CircuitState::MetricsOnly => None,
        };
        match (span, fill) {
            (Some((_, open)), Some(now)) if open == now => {}
            (Some((from, open)), _) => {
                close(svg, from, t, open);
                span = fill.map(|f| (t, f));
            }
            (None, Some(now)) => span = Some((t, now)),
            (None, None) => {}
        }
    }
    if let (Some((from, open)), Some(last)) = (span, run.timeline().last()) {
        close(svg, from, last.elapsed.as_secs_f64(), open);
    }
    // Axes, the scale, the end of the offered load.
    let bottom = plot_top + PLOT_HEIGHT;
    let _ = writeln!(
        svg,
        r##"<line x1="{LEFT}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#999999"/><line x1="{LEFT}" y1="{plot_top}" x2="{LEFT}" y2="{bottom}" stroke="#999999"/>
<line x1="{:.1}" y1="{plot_top}" x2="{:.1}" y2="{bottom}" stroke="#999999" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#777777" font-size="10">load ends</text>"##,
        WIDTH - RIGHT,
        x_of(run.load_ends().as_secs_f64()),
        x_of(run.load_ends().as_secs_f64()),
        x_of(run.load_ends().as_secs_f64()) - 3.0,
        plot_top + 10.0,
    );
    let mut rate = FLOOR;
    while rate <= y_max * 1.0001 {
        let y = y_of(rate);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eeeeee"/><text x="{}" y="{:.1}" text-anchor="end" fill="#555555">{rate:.0}/s</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
        rate *= 10.0;
    }
    // At most a dozen labels: seconds up to two minutes, minutes after.
    let step = [
        1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ]
    .into_iter()
    .find(|step| x_max / step <= 12.0)
    .unwrap_or(7200.0);
    let mut tick: f64 = 0.0;
    while tick <= x_max {
        let label = if step >= 60.0 {
            format!("{:.0} min", tick / 60.0)
        } else {
            format!("{tick:.0} s")
        };
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#555555">{label}</text>"##,
            x_of(tick),
            bottom + 14.0
        );
        tick += step;
    }
    // The calls in flight, on the right-hand scale.
    let flight_y =
        |calls: u64| bottom - PLOT_HEIGHT * calls.min(in_flight_max) as f64 / in_flight_max as f64;
    for calls in [0, in_flight_max / 2, in_flight_max] {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{:.1}" fill="{IN_FLIGHT}">{calls}</text>"#,
            WIDTH - RIGHT + 4.0,
            flight_y(calls) + 4.0
        );
    }
    // On the right-hand scale too: the calls in flight (dashed) and an adaptive limit.
    let right_hand = |svg: &mut String, of: fn(&Sample) -> u64, style: &str| {
        if run.timeline().is_empty() {
            return;
        }
        let mut line = String::new();
        for sample in run.timeline() {
            let _ = write!(
                line,
                "{:.1},{:.1} ",
                x_of(sample.elapsed.as_secs_f64()),
                flight_y(of(sample))
            );
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" {style} stroke-width="1.5" points="{}"/>"#,
            line.trim_end()
        );
    };
    right_hand(
        svg,
        |s| s.in_flight,
        &format!(r#"stroke="{IN_FLIGHT}" stroke-dasharray="5 2""#),
    );
    if run.draws_limit() {
        right_hand(svg, |s| u64::from(s.limit), &format!(r#"stroke="{LIMIT}""#));
    }
    for ((_, colour, _), points) in SERIES.iter().zip(series) {
        if points.is_empty() {
            continue;
        }
        let mut line = String::new();
        for &(t, rate) in points {
            let _ = write!(line, "{:.1},{:.1} ", x_of(t), y_of(rate.min(y_max)));
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            line.trim_end()
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::drill::report::{BreakerSummary, Latencies};
    use crate::drill::{Attempts, Counts, DrillConfig, Layout};

    fn run(layout: Layout, open_from: u64) -> RunReport {
        let mut report = RunReport::new(
            layout,
            Counts::default(),
            Latencies::default(),
            BreakerSummary {
                first_open: None,
                openings: 0,
                open_time: Duration::ZERO,
            },
            Duration::from_secs(2),
            Duration::from_secs(2),
            0,
            Attempts::default(),
        );
        report.timeline = (0..20u64)
            .map(|i| Sample {
                elapsed: Duration::from_millis(100 * i),
                counts: Counts {
                    succeeded: 30 * i,
                    not_permitted: 10 * i,
                    ..Counts::default()
                },
                breaker: if i >= open_from {
                    CircuitState::Open
                } else {
                    CircuitState::Closed
                },
                in_flight: 3 * i,
                limit: 80,
            })
            .collect();
        report
    }

    #[test]
    fn each_layout_is_a_panel_of_its_outcomes_with_the_open_breaker_shaded() {
        let report = DrillReport {
            config: DrillConfig::quick(),
            runs: vec![run(Layout::Incident, 10), run(Layout::BulkheadFirst, 99)],
        };
        let svg = report.svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains(">incident-layout<") && svg.contains(">bulkhead-first<"));
        // Each outcome and the calls in flight, in each panel.
        assert_eq!(svg.matches("<polyline").count(), 2 * (SERIES.len() + 1));
        // Up to 57 calls in flight: a right-hand scale of 0, 50 and 100.
        assert!(
            svg.contains(">100</text>") && svg.contains(">50</text>"),
            "{svg}"
        );
        // One open span, in the incident's panel only.
        assert_eq!(
            svg.matches(r##"fill="#ffcdd2"/>"##).count(),
            2,
            "the span and the legend"
        );
        // 30 successes per 100 ms: 300 per second, on a scale of 1 to 1000 (a rate of a call
        // or two a second stays above the bottom).
        assert!(svg.contains(">1/s<") && svg.contains(">1000/s<"), "{svg}");
        assert!(!svg.contains(">10000/s<"), "{svg}");
        // The end of the offered load is labelled, in each panel.
        assert_eq!(svg.matches(">load ends</text>").count(), 2, "{svg}");
    }

    #[test]
    fn the_in_flight_scale_ends_at_a_round_number() {
        assert_eq!(nice_ceiling(0), 10);
        assert_eq!(nice_ceiling(10), 10);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(57), 100);
        assert_eq!(nice_ceiling(240), 500);
        assert_eq!(nice_ceiling(2_001), 5_000);
    }

    #[test]
    fn the_scale_ends_at_a_power_of_ten() {
        assert_eq!(power_ceiling(300.0), 1_000.0);
        assert_eq!(power_ceiling(1_000.0), 1_000.0);
        assert_eq!(power_ceiling(1_001.0), 10_000.0);
        assert_eq!(power_ceiling(7.0), 100.0);
    }
}
