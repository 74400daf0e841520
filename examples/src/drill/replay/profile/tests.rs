use super::*;

const HEADER: &str = "time,requests_per_second,p50_ms,p99_ms,error_rate,workers";

fn csv(rows: &[&str]) -> Result<Profile, ProfileError> {
    Profile::from_csv(&format!("{HEADER}\n{}\n", rows.join("\n")))
}

/// The error of `rows`, as the user reads it.
fn refused(rows: &[&str]) -> String {
    csv(rows).expect_err("refused").to_string()
}

#[test]
fn a_csv_profile_takes_its_columns_in_any_order_with_comments_and_blank_lines() {
    let profile = Profile::from_csv(
        "# exported from the orders dashboard\n\
         p50_ms, time, requests_per_second\n\
         \n\
         40, 0, 100\n\
         # the surge\n\
         80, 30, 250.5\n",
    )
    .unwrap();
    let steps = profile.steps();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].at, Duration::from_secs(30));
    assert_eq!(steps[1].rate, 250.5);
    assert_eq!(steps[1].p50, Duration::from_millis(80));
    assert_eq!(steps[1].p99, steps[1].p50, "no p99 column: no spread");
    assert_eq!(steps[0].error_rate, 0.0);
    assert_eq!(steps[0].workers, None);
    assert_eq!(profile.duration(), Duration::from_secs(60));
    assert_eq!(profile.start(), None);
    assert_eq!(profile.clock_time(Duration::from_secs(3)), "3.0 s");
}

#[test]
fn times_of_day_are_read_as_rfc_3339_or_unix_seconds_and_reported_as_such() {
    for rows in [
        [
            "2024-03-14T12:03:00Z,100,40,90,0.01,10",
            "2024-03-14T12:03:10Z,100,40,90,0.01,10",
        ],
        [
            "1710417780,100,40,90,0.01,10",
            "1710417790,100,40,90,0.01,10",
        ],
    ] {
        let profile = csv(&rows).unwrap();
        assert_eq!(profile.start(), Some(1_710_417_780.0));
        assert_eq!(profile.steps()[1].at, Duration::from_secs(10));
        assert_eq!(profile.clock_time(Duration::from_secs(47)), "12:03:47");
    }
}

#[test]
fn every_malformed_header_is_refused_with_its_reason() {
    let cases = [
        (
            "time,requests_per_second,p50,p99_ms\n0,1,2,3\n1,1,2,3\n",
            "line 1: unknown column `p50`; the columns are `time`, `requests_per_second`, `p50_ms`",
        ),
        (
            "requests_per_second,p50_ms\n1,2\n3,4\n",
            "line 1: no `time` column",
        ),
        (
            "time,p50_ms\n0,2\n1,4\n",
            "line 1: no `requests_per_second` column",
        ),
        (
            "time,requests_per_second\n0,2\n1,4\n",
            "line 1: no `p50_ms` column",
        ),
        (
            "time,requests_per_second,p50_ms,p50_ms\n0,1,2,3\n",
            "line 1: the column `p50_ms` is named twice",
        ),
    ];
    for (text, expected) in cases {
        let error = Profile::from_csv(text).expect_err(text).to_string();
        assert!(error.starts_with(expected), "{text:?}: {error}");
    }
}

#[test]
fn every_malformed_row_is_refused_with_its_line_and_column() {
    let ok = "0,100,40,90,0.01,10";
    let cases: [(&[&str], &str); 16] = [
        (
            &[ok, "10,100,40,90,0.01"],
            "line 3: 5 fields, where the header names 6",
        ),
        (
            &[ok, "10,many,40,90,0.01,10"],
            "line 3, column `requests_per_second`: `many` is not a number",
        ),
        (
            &[ok, "10,,40,90,0.01,10"],
            "line 3, column `requests_per_second`: empty",
        ),
        (
            &[ok, "10,-5,40,90,0.01,10"],
            "line 3, column `requests_per_second`: must be a number at or above 0",
        ),
        (
            &[ok, "10,100,0,90,0.01,10"],
            "line 3, column `p50_ms`: the median latency must be from a microsecond to an hour",
        ),
        (
            &[ok, "10,100,40,30,0.01,10"],
            "line 3, column `p99_ms`: must be at least the median (p50), and at most an hour",
        ),
        (
            &[ok, "10,100,40,90,3,10"],
            "line 3, column `error_rate`: 3 is not a fraction in [0, 1] (3 % is 0.03)",
        ),
        (
            &[ok, "10,100,40,90,0.01,0"],
            "line 3, column `workers`: 0 is not a count of at least 1",
        ),
        (
            &[ok, "0,100,40,90,0.01,10"],
            "line 3: the times must increase",
        ),
        (
            &[ok, "soon,100,40,90,0.01,10"],
            "line 3, column `time`: `soon` is not a time",
        ),
        (
            &[ok, "2024-03-14T12:03:00Z,100,40,90,0.01,10"],
            "line 3, column `time`: mixes times of day and seconds",
        ),
        (&[ok], "line 1: 1 time step: a profile needs at least two"),
        // Values a `Duration` or a count cannot hold are refused, not a panic.
        (&["1000000000,100,40,90,0.01,10", "1e25,100,40,90,0.01,10"], "line 3: too far from the first step's time"),
        (&[ok, "10,100,1e30,1e30,0.01,10"], "line 3, column `p50_ms`: the median latency must be from a microsecond to an hour"),
        (&[ok, "10,100,0.0001,0.0001,0.01,10"], "line 3, column `p50_ms`: the median latency must be from a microsecond to an hour"),
        (&[ok, "10,1e20,40,90,0.01,10"], "line 1: offers 1000000000000000000000 requests, more than 1000000000: replay a part of it"),
    ];
    for (rows, expected) in cases {
        let error = refused(rows);
        assert!(error.starts_with(expected), "{rows:?}: {error}");
    }
}

#[test]
fn the_arrivals_offer_the_rounded_integral_of_the_rate_fractional_rates_included() {
    // 0.3 requests a second for ten 1 s steps, then 2.5 for two: 3 + 5 = 8.
    let mut rows: Vec<String> = (0..10).map(|t| format!("{t},0.3,10,10,0,1")).collect();
    rows.push("10,2.5,10,10,0,1".into());
    rows.push("11,2.5,10,10,0,1".into());
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let profile = csv(&rows).unwrap();
    assert!((profile.offered() - 8.0).abs() < 1e-9);
    let arrivals: Vec<Duration> = profile.arrivals(7).collect();
    assert_eq!(arrivals.len(), 8);
    assert!(arrivals.windows(2).all(|w| w[0] <= w[1]), "in time order");
    assert!(arrivals.iter().all(|a| *a < profile.duration()));
    // The low rate's three arrivals are spread over its ten seconds, at most one per
    // rounding step of the integral: the running total never runs ahead by a whole request.
    assert_eq!(
        arrivals
            .iter()
            .filter(|a| **a < Duration::from_secs(10))
            .count(),
        3
    );
    assert_eq!(arrivals, profile.arrivals(7).collect::<Vec<_>>(), "seeded");
    assert_ne!(arrivals, profile.arrivals(8).collect::<Vec<_>>());
}

#[test]
fn a_busy_profile_offers_its_integral_within_half_a_request() {
    let rows: Vec<String> = (0..60)
        .map(|t| format!("{t},{},10,30,0.01,4", 100.0 + 37.3 * f64::from(t % 7)))
        .collect();
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let profile = csv(&rows).unwrap();
    let offered = profile.arrivals(1).count() as f64;
    assert!(
        (offered - profile.offered()).abs() <= 0.5,
        "{offered} against {}",
        profile.offered()
    );
}

#[test]
fn service_times_follow_the_median_and_the_99th_percentile() {
    let profile = csv(&["0,1,40,120,0,1", "1,1,40,120,0,1"]).unwrap();
    let step = profile.step_at(Duration::from_millis(1500));
    let ms = |d: Duration| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
    assert_eq!(ms(step.service_time(0.0)), 40.0);
    assert_eq!(ms(step.service_time(Z_99)), 120.0);
}

fn matrix(values: &[(f64, &str)]) -> String {
    let values: Vec<String> = values
        .iter()
        .map(|(t, v)| format!("[{t},\"{v}\"]"))
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[{}]}}]}}}}"#,
        values.join(",")
    )
}

#[test]
fn prometheus_exports_join_on_the_rates_samples_with_gaps_and_irregular_steps() {
    let t0 = 1_710_417_600.0;
    // The rate every 15 s but a missing sample at +45 (Prometheus left it out); the median
    // every 30 s with a NaN (no requests to take a quantile of); the p99 once.
    let rate = matrix(&[
        (t0, "100"),
        (t0 + 15.0, "120"),
        (t0 + 30.0, "140"),
        (t0 + 60.0, "160"),
    ]);
    let p50 = matrix(&[
        (t0 + 5.0, "0.040"),
        (t0 + 30.0, "NaN"),
        (t0 + 60.0, "0.080"),
    ]);
    let p99 = matrix(&[(t0 + 20.0, "0.200")]);
    let errors = matrix(&[(t0, "0.01"), (t0 + 30.0, "0.02")]);
    let profile = Profile::from_prometheus(&[
        (Column::Rate, &rate),
        (Column::P50, &p50),
        (Column::P99, &p99),
        (Column::ErrorRate, &errors),
    ])
    .unwrap();
    let steps = profile.steps();
    assert_eq!(steps.len(), 4);
    let at: Vec<u64> = steps.iter().map(|s| s.at.as_secs()).collect();
    assert_eq!(
        at,
        [0, 15, 30, 60],
        "the rate's own times, the gap held over"
    );
    assert_eq!(steps[2].rate, 140.0);
    // Before its first sample a column takes its first; a NaN keeps the value before it.
    assert_eq!(steps[0].p50, Duration::from_millis(40));
    assert_eq!(steps[2].p50, Duration::from_millis(40));
    assert_eq!(steps[3].p50, Duration::from_millis(80));
    assert_eq!(steps[0].p99, Duration::from_millis(200));
    assert_eq!(steps[2].error_rate, 0.02);
    assert_eq!(profile.start(), Some(t0));
    assert_eq!(
        profile.duration(),
        Duration::from_secs(75),
        "the last sample lasts the query's step, 15 s"
    );
}

#[test]
fn a_gap_in_the_rate_longer_than_the_lookback_is_a_time_without_load() {
    let t0 = 1_710_417_600.0;
    let rate = matrix(&[(t0, "100"), (t0 + 600.0, "100"), (t0 + 610.0, "100")]);
    let p50 = matrix(&[(t0, "0.010")]);
    let profile = Profile::from_prometheus(&[(Column::Rate, &rate), (Column::P50, &p50)]).unwrap();
    let at: Vec<(u64, f64)> = profile
        .steps()
        .iter()
        .map(|s| (s.at.as_secs(), s.rate))
        .collect();
    assert_eq!(at, [(0, 100.0), (300, 0.0), (600, 100.0), (610, 100.0)]);
    assert!((profile.offered() - 100.0 * (300.0 + 10.0 + 10.0)).abs() < 1e-6);
}

#[test]
fn every_malformed_prometheus_export_is_refused_with_its_column_and_field() {
    let t0 = 1_710_417_600.0;
    let good = matrix(&[(t0, "1"), (t0 + 10.0, "2")]);
    let two = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"instance":"a"},"values":[[1,"1"]]},{"metric":{"instance":"b"},"values":[[1,"1"]]}]}}"#;
    let cases: [(Vec<(Column, String)>, &str); 10] = [
        (
            vec![(Column::Rate, "{\"status\":".into())],
            "requests_per_second: not a Prometheus query_range response (line 1, column 10)",
        ),
        (
            vec![(Column::Rate, r#"{"status":"error","error":"parse error at char 5"}"#.into())],
            "requests_per_second: status: the query failed: parse error at char 5",
        ),
        (
            vec![(Column::Rate, r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into())],
            "requests_per_second: data.resultType: `vector`: export a range query",
        ),
        (
            vec![(Column::Rate, r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into())],
            "requests_per_second: data.result: no series",
        ),
        (
            vec![(Column::P99, two.into())],
            "p99_seconds: data.result: 2 series ({\"instance\":\"a\"}, {\"instance\":\"b\"}): aggregate the query to one",
        ),
        (
            vec![(Column::Rate, matrix(&[(t0, "1"), (t0 + 10.0, "+Inf")]))],
            "requests_per_second: data.result[0].values[1]: `+Inf` is not a finite number",
        ),
        (
            vec![(Column::Rate, matrix(&[(t0, "1"), (t0, "2")]))],
            "requests_per_second: data.result[0].values[1]: the sample times must increase",
        ),
        (
            vec![(Column::Rate, good.clone()), (Column::P50, matrix(&[(t0, "-0.5")]))],
            "p50_seconds in force at requests_per_second: data.result[0].values[0]: the median latency must be from a microsecond to an hour",
        ),
        (vec![(Column::P50, good.clone())], "no `requests_per_second` export"),
        (vec![(Column::Rate, good.clone())], "no `p50_seconds` export"),
    ];
    for (exports, expected) in cases {
        let exports: Vec<(Column, &str)> = exports.iter().map(|(c, t)| (*c, t.as_str())).collect();
        let error = Profile::from_prometheus(&exports)
            .expect_err(expected)
            .to_string();
        assert!(error.starts_with(expected), "{expected}: {error}");
    }
    let error = Column::from_prometheus_name("p99_ms")
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("`p99_ms`: not a column of a profile"),
        "{error}"
    );
}
