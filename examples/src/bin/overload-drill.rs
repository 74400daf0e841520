//! `overload-drill`: the incident this project exists to prevent, replayed in process.
//!
//! ```sh
//! cargo run --release --bin overload-drill            # about 50 s
//! cargo run --release --bin overload-drill -- --quick # about 13 s
//! cargo run --release --bin overload-drill -- --config examples/config/incident.toml
//! ```
//!
//! The drill logic lives in `resilience_examples::drill`; this binary parses flags, shows a
//! progress bar per layout and prints the summary.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use resilience_examples::drill::{
    self, DrillConfig, DrillReport, Layout, Observer, Progress, RunReport,
};

/// Replays the overload incident against five layouts of the same guarded order service:
/// the breaker outside the bulkhead counting rejections as failures (Resilience4j's default),
/// this project's bulkhead-first default (fair and unfair), and all five aspects at this
/// project's precedence and in Resilience4j's Spring order.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Concurrent callers [default: 500]
    #[arg(long)]
    callers: Option<u32>,
    /// Seconds of load per layout [default: 15, or 4 with --quick]
    #[arg(long, value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Seed of every random draw (the same seed offers the same load to every layout)
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A short run: 4 s per layout, about 21 s in all
    #[arg(long)]
    quick: bool,
    /// The layouts to run, comma-separated [default: all of them, in order]
    #[arg(long, value_delimiter = ',', value_parser = parse_layout)]
    layouts: Vec<Layout>,
    /// The adaptive comparison instead: fixed limits from 20 to 200 calls beside adaptive
    /// limits (Gradient2, Vegas, AIMD; tower-acc's Gradient2 and tower-resilience-adaptive's
    /// Vegas as peers) started at 10 and at 400, against a downstream that degrades and then
    /// recovers (19 layouts, about 5 min; 90 s with --quick)
    #[arg(long)]
    adaptive: bool,
    /// The slow-tail drill instead: a dependency whose attempts are 3 % (then 30 %) ten times
    /// slower, called with and without `#[hedge]` (a 20 ms delay, a budget of one extra
    /// attempt per ten calls), 20 000 calls at 1 000/s in virtual time (about a second)
    #[arg(long)]
    slow_tail: bool,
    /// Also write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Also draw the runs as an SVG image to PATH: calls per second by outcome, the calls in
    /// flight at the downstream, the breaker's open time shaded
    #[arg(long, value_name = "PATH", visible_alias = "plot")]
    svg: Option<PathBuf>,
    /// Take the guards' numbers from the `orders` instances of a configuration file, such as
    /// examples/config/incident.toml (the layouts still set precedence and what they compare)
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

fn parse_layout(text: &str) -> Result<Layout, String> {
    Layout::from_name(text).ok_or_else(|| {
        let names: Vec<String> = Layout::ALL.iter().map(|l| l.name()).collect();
        format!(
            "unknown layout `{text}`; the layouts are {}, fixed-N and ALGORITHM-from-N \
             (gradient2, vegas, aimd; N up to {})",
            names.join(", "),
            Layout::ADAPTIVE_MAX_LIMIT
        )
    })
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err("the duration must be a positive number of seconds".into());
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// One bar per layout, filling with the time the layout has run; hidden when stdout is not a
/// terminal, where a line per finished layout is printed instead.
struct Bars {
    bars: Vec<(Layout, ProgressBar)>,
    interactive: bool,
}

impl Bars {
    fn new(config: &DrillConfig) -> Self {
        let interactive = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        let multi = MultiProgress::with_draw_target(if interactive {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let style = ProgressStyle::with_template(
            "{prefix:<22} [{bar:30.cyan/blue}] {elapsed:>4} {wide_msg}",
        )
        .expect("the template is valid")
        .progress_chars("=> ");
        let bars = config
            .layouts
            .iter()
            .map(|&layout| {
                let bar = multi.add(ProgressBar::new(config.duration.as_millis() as u64));
                bar.set_style(style.clone());
                bar.set_prefix(layout.name());
                bar.set_message("waiting");
                (layout, bar)
            })
            .collect();
        Bars { bars, interactive }
    }

    fn bar(&self, layout: Layout) -> Option<&ProgressBar> {
        self.bars.iter().find(|(l, _)| *l == layout).map(|(_, b)| b)
    }
}

impl Observer for Bars {
    fn layout_started(&self, layout: Layout, _duration: Duration) {
        if let Some(bar) = self.bar(layout) {
            bar.reset_elapsed();
            bar.set_message("starting");
        }
    }

    fn progress(&self, layout: Layout, p: &Progress) {
        let Some(bar) = self.bar(layout) else { return };
        bar.set_position(p.elapsed.min(p.duration).as_millis() as u64);
        let c = &p.counts;
        let phase = if p.elapsed >= p.duration {
            "draining · "
        } else {
            ""
        };
        bar.set_message(format!(
            "{phase}ok {} · failed {} · bulkhead {} · not permitted {} · breaker {}",
            c.succeeded, c.failed, c.rejected_bulkhead, c.not_permitted, p.breaker
        ));
    }

    fn layout_finished(&self, layout: Layout, run: &RunReport) {
        let summary = format!(
            "done in {:.1} s: {} offered, {} succeeded",
            run.elapsed.as_secs_f64(),
            run.counts.offered,
            run.counts.succeeded
        );
        if let Some(bar) = self.bar(layout) {
            bar.finish_with_message(summary.clone());
        }
        if !self.interactive {
            println!("{layout}: {summary}");
        }
    }
}

fn print_parameters(c: &DrillConfig) {
    say(
        "",
        "overload drill: the same seeded load against each layout of one guarded order service",
    );
    say(
        "  load:       ",
        &format!(
            "{} callers ramping up over {:.1} s, thinking {}-{} ms between orders, \
             {:.1} s per layout, seed {}",
            c.callers,
            c.duration.mul_f64(c.ramp).as_secs_f64(),
            c.think_time.0.as_millis(),
            c.think_time.1.as_millis(),
            c.duration.as_secs_f64(),
            c.seed
        ),
    );
    say(
        "  downstream: ",
        &format!(
            "{} workers, service time {} ms rising to {} ms over {:.1} s (±25 %){}, \
             {:.0} % of requests fail",
            c.downstream_workers,
            c.service_time_start.as_millis(),
            c.service_time_peak.as_millis(),
            c.duration.mul_f64(c.degradation).as_secs_f64(),
            c.recovery.map_or(String::new(), |share| format!(
                " and back to {} ms at {:.1} s",
                c.service_time_start.as_millis(),
                c.duration.mul_f64(share).as_secs_f64()
            )),
            c.failure_probability * 100.0
        ),
    );
    let limit = if c
        .layouts
        .iter()
        .all(|l| matches!(l, Layout::Fixed(_) | Layout::Adaptive(..)))
    {
        "each layout's limit".to_owned()
    } else {
        format!("{} concurrent calls", c.bulkhead_max_concurrent_calls)
    };
    say(
        "  bulkhead:   ",
        &format!("{limit}, {} ms max wait", c.bulkhead_max_wait.as_millis()),
    );
    say(
        "  breaker:    ",
        &format!(
            "{} % failure rate over the last {} calls (at least {}), {:.1} s open, \
             {} half-open probes",
            c.breaker_failure_rate_threshold,
            c.breaker_window,
            c.breaker_minimum_calls,
            c.breaker_open_wait.as_secs_f64(),
            c.breaker_half_open_calls
        ),
    );
    if c.layouts.iter().any(|l| l.all_five()) {
        say(
            "  all five:   ",
            &format!(
                "rate limiter {}/s, retry {} attempts from {} ms (doubling), \
                 time limiter {} ms",
                c.rate_limit_per_second,
                c.retry_max_attempts,
                c.retry_wait.as_millis(),
                c.time_limiter_timeout.as_millis()
            ),
        );
    }
    for layout in &c.layouts {
        say(&format!("  {:<22}", layout.name()), &layout.describe());
    }
    say(
        "  ",
        "the load is closed-loop: a caller orders again as soon as its last order ends, so a \
         layout that refuses at once is offered many more calls; a layout that admits more has \
         slower successes, as more of them wait for a permit and queue for the downstream",
    );
    println!();
}

/// Prints `text` wrapped within the drill's width, `first` before its first line and as
/// many spaces before the others.
fn say(first: &str, text: &str) {
    say_indented(first, &" ".repeat(first.chars().count()), text);
}

/// Prints `text` wrapped within the drill's width, `first` before its first line and `rest`
/// before the others.
fn say_indented(first: &str, rest: &str, text: &str) {
    println!("{}", drill::wrap(first, rest, text));
}

fn print_report(report: &DrillReport) {
    println!();
    print!("{}", report.table());
    println!();
    say(
        "",
        "bulkhead full, breaker open, throttled (by the rate limiter) and timed out (by the time \
         limiter): how the other calls were refused; latencies are as the caller saw them, and \
         \"rejected\" covers the bulkhead's and the breaker's refusals; attempts = attempts per \
         offered call (1 + its retries); ok/s = succeeded per second of load",
    );
    println!();
    for run in &report.runs {
        say_indented("", "  ", &run.reconciliation());
    }
    println!();
    for line in report.reading() {
        say_indented("", "  ", &line);
    }
}

/// `--slow-tail`: both layouts on both tails, and what they show.
fn slow_tail(seed: u64, started: Instant) -> ExitCode {
    use resilience_examples::drill::slow_tail::{self, SlowTailConfig, Table};
    let config = SlowTailConfig {
        seed,
        ..SlowTailConfig::default()
    };
    println!(
        "slow-tail drill: {} calls at {}/s, attempts of {} ms (±25 %), slow ones {}x slower; \
         the hedge after {} ms, one extra attempt, budget {:.0} % of calls; virtual time, seed {}",
        config.calls,
        config.rate,
        config.latency.as_millis(),
        config.slow_factor,
        config.delay.as_millis(),
        config.budget_ratio * 100.0,
        config.seed
    );
    let runs = slow_tail::run(&config);
    print!("{}", Table(&runs));
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args = Args::parse();
    let started = Instant::now();
    if args.slow_tail {
        return slow_tail(args.seed, started);
    }
    let mut config = if args.adaptive {
        DrillConfig::adaptive()
    } else {
        DrillConfig::default()
    };
    if args.quick {
        let quick = DrillConfig::quick();
        config.duration = quick.duration;
        config.breaker_open_wait = quick.breaker_open_wait;
    }
    if let Some(callers) = args.callers {
        config.callers = callers;
    }
    if let Some(duration) = args.duration {
        config.duration = duration;
    }
    config.seed = args.seed;
    if !args.layouts.is_empty() {
        config.layouts = args.layouts;
    }
    if let Some(path) = &args.config {
        if let Err(e) = config.take_guards_from_file(path) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        println!("guards: the `orders` instances of {}", path.display());
    }

    // Refuse what cannot run before the minute of load, not after it.
    if let Err(e) = config.validate() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    for path in [&args.json, &args.svg].into_iter().flatten() {
        if let Err(e) = std::fs::File::create(path) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }

    print_parameters(&config);
    let bars = Bars::new(&config);
    let report = match drill::run(&config, &bars) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    drop(bars);
    print_report(&report);

    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report.json()).expect("the report serializes");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, report.svg()) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("wrote {}", path.display());
    }
    println!("\nwall time: {:.1} s", started.elapsed().as_secs_f64());
    if report.reconciles() {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: some offered calls do not add up to exactly one outcome each");
        ExitCode::FAILURE
    }
}
