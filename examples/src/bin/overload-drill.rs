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
    /// examples/config/incident.toml (the layouts still set precedence and what they compare).
    /// With --profile: the guards to replay, as written (repeat it to compare files; the first
    /// is also replayed in this project's default order, with an adaptive bulkhead and in
    /// Resilience4j's Spring order)
    #[arg(long, value_name = "PATH")]
    config: Vec<PathBuf>,
    /// Replay an incident's profile instead: a CSV file (time, requests_per_second, p50_ms,
    /// p99_ms, error_rate, workers), or Prometheus query_range exports, one per column, as
    /// COLUMN=PATH (requests_per_second, p50_seconds, p99_seconds, error_rate, workers)
    #[arg(long, value_name = "PATH or COLUMN=PATH")]
    profile: Vec<String>,
    /// With --profile: the instance the handler's guards are named [default: the one name the
    /// file configures]
    #[arg(long, value_name = "NAME")]
    instance: Option<String>,
    /// With --profile: CALLERS callers waiting for each answer instead of arrivals at the
    /// profile's rate (a closed loop offers less when the service is slow, and hides overload)
    #[arg(long, value_name = "CALLERS")]
    closed_loop: Option<u32>,
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

/// The wall time, and the exit code: a failure if some offered calls did not end in exactly
/// one outcome each.
fn finish(started: Instant, reconciles: bool) -> ExitCode {
    println!("\nwall time: {:.1} s", started.elapsed().as_secs_f64());
    if reconciles {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: some offered calls do not add up to exactly one outcome each");
        ExitCode::FAILURE
    }
}

/// Reads the `--profile` arguments: one CSV file, or `COLUMN=PATH` Prometheus exports.
fn read_profile(args: &[String]) -> Result<drill::replay::Profile, String> {
    use drill::replay::{Column, Profile};
    let read =
        |path: &str| std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"));
    let exports: Vec<Option<(&str, &str)>> = args
        .iter()
        .map(|a| {
            a.split_once('=')
                .filter(|(column, _)| Column::from_prometheus_name(column).is_ok())
        })
        .collect();
    match exports.as_slice() {
        [None] => {
            let path = &args[0];
            if let Some((column, _)) = path
                .split_once('=')
                .filter(|_| !std::path::Path::new(path).exists())
            {
                // Meant as a Prometheus export, with a column the profile does not have.
                return Err(Column::from_prometheus_name(column)
                    .expect_err("not a column")
                    .to_string());
            }
            Profile::from_csv(&read(path)?).map_err(|e| format!("{path}: {e}"))
        }
        _ if exports.iter().all(Option::is_some) => {
            let mut texts = Vec::new();
            for (column, path) in exports.iter().flatten() {
                let column = Column::from_prometheus_name(column).map_err(|e| e.to_string())?;
                texts.push((column, read(path)?));
            }
            let exports: Vec<(Column, &str)> =
                texts.iter().map(|(c, t)| (*c, t.as_str())).collect();
            Profile::from_prometheus(&exports).map_err(|e| e.to_string())
        }
        _ => Err(
            "--profile takes one CSV file, or Prometheus exports as COLUMN=PATH, one per column \
             (requests_per_second, p50_seconds, p99_seconds, error_rate, workers)"
                .into(),
        ),
    }
}

/// `--profile`: the replay of an incident against the files' guards, and what it shows.
fn replay(args: &Args, started: Instant) -> ExitCode {
    use drill::replay::{self, GuardFile, Load, ReplayConfig};
    let fail = |message: &dyn std::fmt::Display| {
        eprintln!("error: {message}");
        ExitCode::from(2)
    };
    let profile = match read_profile(&args.profile) {
        Ok(profile) => profile,
        Err(e) => return fail(&e),
    };
    if args.config.is_empty() {
        return fail(&"--profile replays the guards of a configuration file: add --config PATH");
    }
    let mut files = Vec::new();
    for path in &args.config {
        match GuardFile::read(path) {
            Ok(file) => files.push(file),
            Err(e) => return fail(&e),
        }
    }
    for path in [&args.json, &args.svg].into_iter().flatten() {
        if let Err(e) = std::fs::File::create(path) {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
    }
    let mut config = ReplayConfig::new(files, profile);
    config.instance = args.instance.clone();
    config.seed = args.seed;
    if let Some(callers) = args.closed_loop {
        if callers == 0 {
            return fail(&"--closed-loop needs at least one caller");
        }
        config.load = Load::Closed { callers };
    }
    print_profile(&config);
    let report = match replay::run(&config, &mut |run| {
        println!(
            "{}: replayed in {:.1} s ({} calls)",
            run.name,
            run.wall.as_secs_f64(),
            run.counts.offered
        );
    }) {
        Ok(report) => report,
        Err(e) => return fail(&e),
    };
    println!();
    let width = report.runs.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for run in &report.runs {
        say(&format!("  {:<width$}  ", run.name), &run.description);
    }
    println!();
    print!("{}", report.table());
    println!();
    say(
        "",
        "bulkhead, breaker, throttled and timed out: the calls refused by the bulkhead (full), \
         the breaker (open), the rate limiter, and cut off by the time limiter; attempts = \
         attempts the dependency began to serve per offered call; opened, open for: when the \
         breaker first opened and how long it was open in all; latencies are as the caller saw \
         them; ok/s = successes per second of the profile",
    );
    println!();
    for line in report.findings() {
        say_indented("", "  ", &line);
    }
    for note in &report.notes {
        say_indented("", "  ", &format!("(note) {note}"));
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report.json()).expect("the report serializes");
        if let Err(e) = std::fs::write(path, text + "\n") {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        if let Err(e) = std::fs::write(path, report.svg()) {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
        println!("wrote {}", path.display());
    }
    finish(started, report.reconciles())
}

/// The replay's parameters: the profile in outline, the load, the files.
fn print_profile(config: &drill::replay::ReplayConfig) {
    let profile = &config.profile;
    let steps = profile.steps();
    let range = |of: fn(&drill::replay::ProfileStep) -> f64| {
        let low = steps.iter().map(of).fold(f64::INFINITY, f64::min);
        let high = steps.iter().map(of).fold(0.0, f64::max);
        (low, high)
    };
    let (rate_low, rate_high) = range(|s| s.rate);
    let (p50_low, p50_high) = range(|s| s.p50.as_secs_f64() * 1000.0);
    let (p99_low, p99_high) = range(|s| s.p99.as_secs_f64() * 1000.0);
    let (err_low, err_high) = range(|s| s.error_rate * 100.0);
    say(
        "",
        "replay: what each layout of the guards would have done with this profile",
    );
    say(
        "  profile:    ",
        &format!(
            "{} steps over {:.0} s{}, {:.0} requests offered, {:.0} to {:.0} a second",
            steps.len(),
            profile.duration().as_secs_f64(),
            profile.start().map_or_else(String::new, |_| format!(
                " (from {} UTC)",
                profile.clock_time(std::time::Duration::ZERO)
            )),
            profile.offered(),
            rate_low,
            rate_high
        ),
    );
    let workers = match (
        steps.iter().filter_map(|s| s.workers).min(),
        steps.iter().filter_map(|s| s.workers).max(),
    ) {
        (Some(low), Some(high)) if low == high => format!(", {low} workers"),
        (Some(low), Some(high)) => format!(", {low} to {high} workers"),
        _ => ", as many workers as requests".to_owned(),
    };
    say(
        "  dependency: ",
        &format!(
            "p50 {p50_low:.0} to {p50_high:.0} ms, p99 {p99_low:.0} to {p99_high:.0} ms, \
             {err_low:.1} to {err_high:.1} % errors{workers}"
        ),
    );
    say(
        "  load:       ",
        &format!("{}, seed {}", config.load, config.seed),
    );
    say(
        "  time:       ",
        "virtual (tokio's paused clock, the guards on it too): a replay takes seconds, and \
         the same seed and profile give the same report (a retry's jitter aside)",
    );
    println!();
}

fn main() -> ExitCode {
    let args = Args::parse();
    let started = Instant::now();
    if args.slow_tail {
        return slow_tail(args.seed, started);
    }
    if !args.profile.is_empty() {
        return replay(&args, started);
    }
    if args.config.len() > 1 {
        eprintln!("error: one --config at a time, unless you replay a --profile");
        return ExitCode::from(2);
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
    if let Some(path) = args.config.first() {
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
    finish(started, report.reconciles())
}
