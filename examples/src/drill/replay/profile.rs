//! [`Profile`]: an incident's traffic and its dependency's behaviour, one row per time step,
//! read from a CSV file or from Prometheus `query_range` exports.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::drill::SplitMix64;

/// How long a Prometheus sample stays in force when no later one follows: the replay's choice,
/// Prometheus's default lookback. A longer gap in `requests_per_second` is a time without load.
pub const LOOKBACK: Duration = Duration::from_secs(300);

/// The most requests a profile may offer: a replay keeps every call's latency, 4 bytes each.
pub const MAX_OFFERED: f64 = 1e9;

/// The shortest and the longest latency a profile may give, in seconds: a service time is
/// drawn in nanoseconds, and a far tail must not stall a replay.
const MIN_LATENCY: f64 = 1e-6;
const MAX_LATENCY: f64 = 3600.0;

/// The z-score of the 99th percentile of a normal distribution.
const Z_99: f64 = 2.326_347_874;

/// One time step of a [`Profile`]: from `at` until the next step's `at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileStep {
    /// When the step starts, from the start of the profile.
    pub at: Duration,
    /// Requests offered per second.
    pub rate: f64,
    /// The dependency's median time to serve a request (its service time: with `workers`, a
    /// request that finds every worker busy queues on top of it).
    pub p50: Duration,
    /// The dependency's 99th percentile service time (at least `p50`); service times are drawn
    /// from the log-normal distribution with these two percentiles.
    pub p99: Duration,
    /// The share of the requests it serves that the dependency fails, in `[0, 1]`.
    pub error_rate: f64,
    /// The requests the dependency serves at once; the others queue, first come first served.
    /// `None`: as many as arrive.
    pub workers: Option<u32>,
}

impl ProfileStep {
    /// A service time drawn from this step's distribution, for the standard normal draw `z`.
    pub fn service_time(&self, z: f64) -> Duration {
        let p50 = self.p50.as_secs_f64();
        let sigma = (self.p99.as_secs_f64() / p50).ln() / Z_99;
        // Capped at an hour: a far tail of a wide distribution must not stall a replay.
        Duration::from_secs_f64((p50 * (sigma * z).exp()).min(3600.0))
    }
}

/// An incident's profile: the load offered and how the dependency behaved, step by step.
///
/// Each step holds from its time until the next step's; the last step lasts as long as the one
/// before it (from Prometheus, the query's step: the shortest time between two samples, at most
/// [`LOOKBACK`]). Read one with [`Profile::from_csv`] or [`Profile::from_prometheus`].
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    steps: Vec<ProfileStep>,
    end: Duration,
    /// The Unix time of the first step, where the profile gave times of day.
    start: Option<f64>,
}

/// Why a profile was refused: where (a line of a CSV file, or a field of a JSON export) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// Where: `line 7, column p99_ms`, `requests_per_second: data.result[0].values[3]`.
    pub at: String,
    /// Why, and what to write instead.
    pub reason: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.at, self.reason)
        }
    }
}

impl std::error::Error for ProfileError {}

fn refuse<T>(at: impl Into<String>, reason: impl Into<String>) -> Result<T, ProfileError> {
    Err(ProfileError {
        at: at.into(),
        reason: reason.into(),
    })
}

/// A column of a profile, as a CSV header names it (latencies in milliseconds), or as the key
/// of a Prometheus export (latencies in seconds, Prometheus's unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// `requests_per_second` (required).
    Rate,
    /// `p50_ms`, or `p50_seconds` from Prometheus (required).
    P50,
    /// `p99_ms`, or `p99_seconds` from Prometheus (the median when absent: no spread).
    P99,
    /// `error_rate`, a fraction (0 when absent).
    ErrorRate,
    /// `workers` (as many as arrive when absent).
    Workers,
}

impl Column {
    const ALL: [Column; 5] = [
        Column::Rate,
        Column::P50,
        Column::P99,
        Column::ErrorRate,
        Column::Workers,
    ];

    /// The CSV header of the column.
    pub const fn csv_name(self) -> &'static str {
        match self {
            Column::Rate => "requests_per_second",
            Column::P50 => "p50_ms",
            Column::P99 => "p99_ms",
            Column::ErrorRate => "error_rate",
            Column::Workers => "workers",
        }
    }

    /// The key of a Prometheus export of the column.
    pub const fn prometheus_name(self) -> &'static str {
        match self {
            Column::Rate => "requests_per_second",
            Column::P50 => "p50_seconds",
            Column::P99 => "p99_seconds",
            Column::ErrorRate => "error_rate",
            Column::Workers => "workers",
        }
    }

    /// The column a Prometheus export's key names.
    pub fn from_prometheus_name(name: &str) -> Result<Column, ProfileError> {
        Column::ALL
            .into_iter()
            .find(|c| c.prometheus_name() == name)
            .map_or_else(
                || {
                    refuse(
                        format!("`{name}`"),
                        format!(
                            "not a column of a profile; a Prometheus export is one of {}",
                            names(Column::prometheus_name)
                        ),
                    )
                },
                Ok,
            )
    }
}

fn names(name: fn(Column) -> &'static str) -> String {
    Column::ALL
        .iter()
        .map(|c| format!("`{}`", name(*c)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row's values before they are checked as a step.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    time: f64,
    rate: f64,
    p50: f64,
    p99: Option<f64>,
    error_rate: f64,
    workers: Option<f64>,
}

impl Profile {
    /// Reads a CSV profile: a header naming its columns (any order), then one row per time
    /// step. `time` is seconds from the start (`0`, `10`, `20.5`), a Unix time in seconds, or
    /// an RFC 3339 time (`2024-03-01T12:03:00Z`); then `requests_per_second`, `p50_ms`, and
    /// optionally `p99_ms`, `error_rate` (a fraction: 0.03 for 3 %) and `workers`. Blank
    /// lines and lines starting with `#` are skipped.
    ///
    /// ```
    /// use resilience_examples::drill::replay::Profile;
    ///
    /// let profile = Profile::from_csv(
    ///     "time,requests_per_second,p50_ms,p99_ms,error_rate\n\
    ///      0,300,40,120,0.01\n\
    ///      60,900,90,400,0.02\n",
    /// )?;
    /// assert_eq!(profile.steps().len(), 2);
    /// assert_eq!(profile.duration().as_secs(), 120); // the last step lasts as the one before
    /// assert_eq!(profile.offered(), 300.0 * 60.0 + 900.0 * 60.0);
    /// # Ok::<(), resilience_examples::drill::replay::ProfileError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ProfileError`] naming the line and the column of the first value refused, or the
    /// header's problem: a column unknown or missing, a value not a number or out of range,
    /// times not increasing, fewer than two rows.
    pub fn from_csv(text: &str) -> Result<Profile, ProfileError> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .flexible(true)
            .from_reader(text.as_bytes());
        let header = match reader.headers() {
            Ok(header) => header.clone(),
            Err(e) => return refuse("line 1", format!("unreadable header: {e}")),
        };
        let mut time = None;
        let mut columns = Vec::with_capacity(header.len());
        for (i, name) in header.iter().enumerate() {
            let column = if name == "time" {
                time = Some(i);
                None
            } else {
                match Column::ALL.into_iter().find(|c| c.csv_name() == name) {
                    Some(c) if columns.iter().any(|(_, known)| *known == Some(c)) => {
                        return refuse("line 1", format!("the column `{name}` is named twice"));
                    }
                    Some(c) => Some(c),
                    None => {
                        return refuse(
                            "line 1",
                            format!(
                                "unknown column `{name}`; the columns are `time`, {}",
                                names(Column::csv_name)
                            ),
                        )
                    }
                }
            };
            columns.push((i, column));
        }
        if time.is_none() {
            return refuse("line 1", "no `time` column");
        }
        for required in [Column::Rate, Column::P50] {
            if !columns.iter().any(|(_, c)| *c == Some(required)) {
                return refuse("line 1", format!("no `{}` column", required.csv_name()));
            }
        }
        let mut rows = Vec::new();
        let mut absolute = false;
        for record in reader.records() {
            let record = match record {
                Ok(record) => record,
                Err(e) => {
                    let line = e.position().map_or(0, csv::Position::line);
                    return refuse(format!("line {line}"), e.to_string());
                }
            };
            let line = record.position().map_or(0, csv::Position::line);
            if record.len() != header.len() {
                return refuse(
                    format!("line {line}"),
                    format!(
                        "{} fields, where the header names {}",
                        record.len(),
                        header.len()
                    ),
                );
            }
            let mut row = Row::default();
            for (i, value) in record.iter().enumerate() {
                let at = || format!("line {line}, column `{}`", &header[i]);
                let Some((_, column)) = columns.iter().find(|(c, _)| *c == i) else {
                    continue;
                };
                let Some(column) = column else {
                    let (seconds, is_absolute) =
                        parse_time(value).map_err(|reason| ProfileError { at: at(), reason })?;
                    if !rows.is_empty() && is_absolute != absolute {
                        return refuse(
                            at(),
                            "mixes times of day and seconds from the start: write every time one way",
                        );
                    }
                    absolute = is_absolute;
                    row.time = seconds;
                    continue;
                };
                let number =
                    parse_number(value).map_err(|reason| ProfileError { at: at(), reason })?;
                match column {
                    Column::Rate => row.rate = number,
                    Column::P50 => row.p50 = number / 1000.0,
                    Column::P99 => row.p99 = Some(number / 1000.0),
                    Column::ErrorRate => row.error_rate = number,
                    Column::Workers => row.workers = Some(number),
                }
            }
            rows.push((format!("line {line}"), row));
        }
        Profile::from_rows(rows, absolute, None, "line 1", |row, column| {
            format!("{row}, column `{}`", column.csv_name())
        })
    }

    /// Reads a profile from Prometheus `query_range` exports, one per column: the JSON the API
    /// returns (`{"status": "success", "data": {"resultType": "matrix", "result": [..]}}`),
    /// keyed by the column it gives (`requests_per_second`, `p50_seconds`, `p99_seconds`,
    /// `error_rate`, `workers`; latencies in seconds, as Prometheus keeps them). Each query
    /// must return one series (aggregate it: `sum(rate(..))`,
    /// `histogram_quantile(0.99, sum by (le) (rate(..)))`).
    ///
    /// The steps are the samples of `requests_per_second`, at their own times (steps need not
    /// be regular). At each, every other column takes its latest sample at or before it (before
    /// its first sample, its first). A `NaN` sample (a quantile or a ratio over no requests) is
    /// a gap. A sample holds until the next one for at most [`LOOKBACK`] (the replay's choice,
    /// Prometheus's default lookback: an export has no sample where the query had none): a
    /// longer gap in `requests_per_second` is a time without load; in the other columns, the
    /// last value seen holds.
    ///
    /// # Errors
    ///
    /// A [`ProfileError`] naming the column and the JSON field refused: a failed query, not a
    /// range query's matrix, no series or more than one, a value not a number or out of
    /// range, fewer than two samples of `requests_per_second`, or a required column missing.
    pub fn from_prometheus(exports: &[(Column, &str)]) -> Result<Profile, ProfileError> {
        let mut series: Vec<(Column, Vec<(f64, f64)>)> = Vec::new();
        for &(column, text) in exports {
            let name = column.prometheus_name();
            if series.iter().any(|(c, _)| *c == column) {
                return refuse(name, "given twice");
            }
            series.push((column, read_matrix(name, text)?));
        }
        let get = |column: Column| series.iter().find(|(c, _)| *c == column).map(|(_, s)| s);
        let Some(rates) = get(Column::Rate) else {
            return refuse(
                "",
                "no `requests_per_second` export: the profile's steps are its samples",
            );
        };
        let Some(p50) = get(Column::P50) else {
            return refuse(
                "",
                "no `p50_seconds` export: the dependency's median latency",
            );
        };
        if p50.iter().all(|(_, v)| v.is_nan()) {
            return refuse("p50_seconds", "every sample is NaN: no latency to replay");
        }
        let lookback = LOOKBACK.as_secs_f64();
        let present: Vec<usize> = (0..rates.len()).filter(|&i| !rates[i].1.is_nan()).collect();
        let mut rows = Vec::with_capacity(present.len());
        for (k, &i) in present.iter().enumerate() {
            let (time, rate) = rates[i];
            let row = Row {
                time,
                rate,
                p50: as_of(p50, time).unwrap_or(f64::NAN),
                p99: get(Column::P99).and_then(|s| as_of(s, time)),
                error_rate: get(Column::ErrorRate)
                    .and_then(|s| as_of(s, time))
                    .unwrap_or(0.0),
                workers: get(Column::Workers).and_then(|s| as_of(s, time)),
            };
            let at = format!("requests_per_second: data.result[0].values[{i}]");
            // A gap longer than the lookback: no load from the end of the lookback.
            let quiet = present
                .get(k + 1)
                .filter(|&&next| rates[next].0 - time > lookback)
                .map(|_| Row {
                    time: time + lookback,
                    rate: 0.0,
                    ..row
                });
            rows.push((at.clone(), row));
            if let Some(quiet) = quiet {
                rows.push((at, quiet));
            }
        }
        // The last sample lasts the query's step: the shortest time between two samples (a
        // gap only lengthens one), at most the lookback.
        let step = present
            .windows(2)
            .map(|w| rates[w[1]].0 - rates[w[0]].0)
            .fold(f64::INFINITY, f64::min)
            .min(LOOKBACK.as_secs_f64());
        Profile::from_rows(
            rows,
            true,
            Duration::try_from_secs_f64(step).ok(),
            "requests_per_second",
            |row: &str, column| match column {
                Column::Rate => row.to_owned(),
                other => format!("{} in force at {row}", other.prometheus_name()),
            },
        )
    }

    /// Checks the rows as steps.
    fn from_rows(
        rows: Vec<(String, Row)>,
        absolute: bool,
        // How long the last step lasts; `None`: as long as the one before it.
        last: Option<Duration>,
        whole: &str,
        field: impl Fn(&str, Column) -> String,
    ) -> Result<Profile, ProfileError> {
        if rows.len() < 2 {
            return refuse(
                whole,
                format!(
                    "{} time step{}: a profile needs at least two (each step lasts until the next)",
                    rows.len(),
                    if rows.len() == 1 { "" } else { "s" }
                ),
            );
        }
        let first = rows[0].1.time;
        let mut steps: Vec<ProfileStep> = Vec::with_capacity(rows.len());
        let mut previous = f64::NEG_INFINITY;
        for (at, row) in &rows {
            let field = |column: Column| field(at, column);
            if row.time <= previous {
                return refuse(
                    at.as_str(),
                    "the times must increase from one step to the next",
                );
            }
            previous = row.time;
            if !(row.rate.is_finite() && row.rate >= 0.0) {
                return refuse(field(Column::Rate), "must be a number at or above 0");
            }
            if !(MIN_LATENCY..=MAX_LATENCY).contains(&row.p50) {
                return refuse(
                    field(Column::P50),
                    "the median latency must be from a microsecond to an hour",
                );
            }
            let p99 = row.p99.unwrap_or(row.p50);
            if !(p99 >= row.p50 && p99 <= MAX_LATENCY) {
                return refuse(
                    field(Column::P99),
                    "must be at least the median (p50), and at most an hour",
                );
            }
            if !(0.0..=1.0).contains(&row.error_rate) {
                return refuse(
                    field(Column::ErrorRate),
                    format!(
                        "{} is not a fraction in [0, 1] (3 % is 0.03)",
                        row.error_rate
                    ),
                );
            }
            let workers = match row.workers {
                None => None,
                Some(w) if w.is_finite() && w >= 1.0 && w <= f64::from(u32::MAX) => {
                    Some(w.round() as u32)
                }
                Some(w) => {
                    return refuse(
                        field(Column::Workers),
                        format!("{w} is not a count of at least 1"),
                    )
                }
            };
            let Ok(from_first) = Duration::try_from_secs_f64(row.time - first) else {
                return refuse(at.as_str(), "too far from the first step's time");
            };
            steps.push(ProfileStep {
                at: from_first,
                rate: row.rate,
                p50: Duration::from_secs_f64(row.p50),
                p99: Duration::from_secs_f64(p99),
                error_rate: row.error_rate,
                workers,
            });
        }
        let last_at = steps[steps.len() - 1].at;
        let length = last.unwrap_or(last_at - steps[steps.len() - 2].at);
        let Some(end) = last_at.checked_add(length) else {
            return refuse(whole, "the profile ends too far from its first step's time");
        };
        let profile = Profile {
            steps,
            end,
            start: absolute.then_some(first),
        };
        let offered = profile.offered();
        if offered.is_nan() || offered > MAX_OFFERED {
            return refuse(
                whole,
                format!(
                    "offers {offered:.0} requests, more than {MAX_OFFERED:.0}: replay a part of it"
                ),
            );
        }
        Ok(profile)
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[ProfileStep] {
        &self.steps
    }

    /// How long the profile lasts.
    pub fn duration(&self) -> Duration {
        self.end
    }

    /// The Unix time of the profile's start, where it gave times of day.
    pub fn start(&self) -> Option<f64> {
        self.start
    }

    /// When step `i` ends.
    fn end_of(&self, i: usize) -> Duration {
        self.steps.get(i + 1).map_or(self.end, |next| next.at)
    }

    /// The step in force `elapsed` into the profile (the last one after its end).
    pub fn step_at(&self, elapsed: Duration) -> &ProfileStep {
        let i = self.steps.partition_point(|s| s.at <= elapsed);
        &self.steps[i.saturating_sub(1)]
    }

    /// The requests the profile offers: the integral of its rate over its steps.
    pub fn offered(&self) -> f64 {
        (0..self.steps.len())
            .map(|i| self.steps[i].rate * (self.end_of(i) - self.steps[i].at).as_secs_f64())
            .sum()
    }

    /// The arrival times of an open-loop replay, seeded: each step gets the requests that
    /// bring the running total to the rounded integral of the rate so far (so the whole
    /// profile offers [`offered`](Self::offered) rounded to the nearest request), placed
    /// uniformly at random within the step: given the step's count, the arrivals of a Poisson
    /// process of the step's rate.
    pub fn arrivals(&self, seed: u64) -> Arrivals<'_> {
        Arrivals {
            profile: self,
            rng: SplitMix64::for_stream(seed, u64::MAX),
            step: 0,
            integral: 0.0,
            sent: 0,
            pending: Vec::new(),
        }
    }

    /// `elapsed` into the profile as a time of day (UTC), where the profile gave times of day;
    /// otherwise as seconds from the start.
    pub fn clock_time(&self, elapsed: Duration) -> String {
        match self.start {
            Some(start) => {
                let seconds = (start + elapsed.as_secs_f64()).floor() as i64;
                let day = seconds.rem_euclid(86_400);
                format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
            }
            None => format!("{:.1} s", elapsed.as_secs_f64()),
        }
    }
}

/// The arrival times of an open-loop replay ([`Profile::arrivals`]), in order.
#[derive(Debug)]
pub struct Arrivals<'p> {
    profile: &'p Profile,
    rng: SplitMix64,
    step: usize,
    integral: f64,
    sent: u64,
    /// This step's arrivals, latest first.
    pending: Vec<Duration>,
}

impl Iterator for Arrivals<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        while self.pending.is_empty() {
            let step = self.profile.steps.get(self.step)?;
            let from = step.at;
            let to = self.profile.end_of(self.step);
            self.step += 1;
            self.integral += step.rate * (to - from).as_secs_f64();
            let due = self.integral.round() as u64;
            let count = due.saturating_sub(self.sent);
            self.sent += count;
            let span = (to - from).as_secs_f64();
            self.pending = (0..count)
                .map(|_| from + Duration::from_secs_f64(self.rng.next_f64() * span))
                .collect();
            self.pending.sort_unstable_by(|a, b| b.cmp(a));
        }
        self.pending.pop()
    }
}

/// A time: seconds from the start, a Unix time (seconds, after 2001), or RFC 3339. Returns the
/// seconds and whether they are a time of day.
fn parse_time(value: &str) -> Result<(f64, bool), String> {
    if let Ok(seconds) = value.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return Err(format!("`{value}` is not a time at or after 0"));
        }
        // A billion seconds is 2001 as a Unix time, and 31 years as an offset.
        return Ok((seconds, seconds >= 1e9));
    }
    match humantime::parse_rfc3339_weak(value) {
        Ok(time) => Ok((
            time.duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| format!("`{value}` is before 1970"))?
                .as_secs_f64(),
            true,
        )),
        Err(_) => Err(format!(
            "`{value}` is not a time: seconds from the start, a Unix time, or RFC 3339 \
             (2024-03-01T12:03:00Z)"
        )),
    }
}

/// The value of `samples` in force at `time`: the latest one at or before it that is not a gap,
/// or before the first, the first.
fn as_of(samples: &[(f64, f64)], time: f64) -> Option<f64> {
    let later = samples.partition_point(|(t, _)| *t <= time);
    samples[..later]
        .iter()
        .rev()
        .chain(&samples[later..])
        .map(|&(_, v)| v)
        .find(|v| !v.is_nan())
}

fn parse_number(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(number) if number.is_finite() => Ok(number),
        _ if value.is_empty() => Err("empty: every row needs a value in every column".into()),
        _ => Err(format!("`{value}` is not a number")),
    }
}

/// A `query_range` response.
#[derive(Deserialize)]
struct Response {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// The one series of a `query_range` export: `(Unix time, value)` in time order, one per
/// sample of the export (a `NaN` sample, a gap, as `NaN`).
fn read_matrix(name: &str, text: &str) -> Result<Vec<(f64, f64)>, ProfileError> {
    let response: Response = serde_json::from_str(text).map_err(|e| ProfileError {
        at: name.to_owned(),
        reason: format!(
            "not a Prometheus query_range response (line {}, column {}): {e}",
            e.line(),
            e.column()
        ),
    })?;
    if response.status != "success" {
        return refuse(
            format!("{name}: status"),
            format!(
                "the query failed: {}",
                response.error.as_deref().unwrap_or(&response.status)
            ),
        );
    }
    let Some(data) = response.data else {
        return refuse(format!("{name}: data"), "missing");
    };
    if data.result_type != "matrix" {
        return refuse(
            format!("{name}: data.resultType"),
            format!(
                "`{}`: export a range query (/api/v1/query_range), which returns a `matrix`",
                data.result_type
            ),
        );
    }
    let series = match data.result.as_slice() {
        [one] => one,
        [] => {
            return refuse(
                format!("{name}: data.result"),
                "no series: the query matched nothing in that range",
            )
        }
        many => {
            let labels: Vec<String> = many
                .iter()
                .take(3)
                .map(|s| serde_json::Value::Object(s.metric.clone()).to_string())
                .collect();
            return refuse(
                format!("{name}: data.result"),
                format!(
                    "{} series ({}{}): aggregate the query to one, e.g. `sum(rate(..[1m]))` or \
                     `histogram_quantile(0.99, sum by (le) (rate(..[1m])))`",
                    many.len(),
                    labels.join(", "),
                    if many.len() > 3 { ", ..." } else { "" }
                ),
            );
        }
    };
    let mut samples = Vec::with_capacity(series.values.len());
    let mut previous = f64::NEG_INFINITY;
    for (i, (time, value)) in series.values.iter().enumerate() {
        let at = || format!("{name}: data.result[0].values[{i}]");
        if !(time.is_finite() && *time > previous) {
            return refuse(at(), "the sample times must increase");
        }
        previous = *time;
        match value.as_str() {
            "NaN" => samples.push((*time, f64::NAN)),
            text => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => samples.push((*time, v)),
                _ => {
                    return refuse(
                        at(),
                        format!("`{text}` is not a finite number (NaN is read as a gap)"),
                    )
                }
            },
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests;
