//! The overload drill, run small: every offered call ends in exactly one outcome, the incident
//! layout opens its breaker on overload alone, the bulkhead-first layouts do not, and with all
//! five aspects the Spring order multiplies attempts where this project's order does not.
//!
//! Both tests use the drill's global registry; `drill::run` runs one drill at a time, and the
//! binary runs in a process of its own. No assertion reads a timing.

use std::process::Command;
use std::time::Duration;

use resilience_examples::drill::{self, DrillConfig, Layout};
use serde_json::Value;

/// A few seconds per layout, with guards and downstream scaled down with the callers so that
/// demand still far exceeds capacity at the peak.
fn small() -> DrillConfig {
    DrillConfig {
        callers: 120,
        duration: Duration::from_secs(2),
        bulkhead_max_concurrent_calls: 20,
        bulkhead_max_wait: Duration::from_millis(200),
        downstream_workers: 15,
        breaker_open_wait: Duration::from_millis(500),
        seed: 7,
        ..DrillConfig::quick()
    }
}

#[test]
fn the_incident_layout_opens_the_breaker_and_bulkhead_first_does_not() {
    let report = drill::run(&small(), &()).expect("the drill runs");
    // Shown when the test fails (or with --nocapture).
    print!("{}", report.table());
    for line in report.reading() {
        println!("{line}");
    }
    assert_eq!(
        report.runs.iter().map(|r| r.layout).collect::<Vec<_>>(),
        Layout::ALL
    );
    for run in &report.runs {
        assert!(run.counts.offered > 0, "{}", run.reconciliation());
        assert!(run.reconciles(), "{}", run.reconciliation());
    }

    // Every layout has a bulkhead in front of the downstream: the calls in flight there never
    // exceed its size, and under this overload they queue beyond the downstream's workers.
    let config = small();
    for run in &report.runs {
        let most = run.timeline.iter().map(|s| s.in_flight).max().unwrap_or(0);
        assert!(
            most <= u64::from(config.bulkhead_max_concurrent_calls),
            "{}: {most} calls in flight",
            run.layout.name()
        );
    }
    let first = report.run(Layout::BulkheadFirst).unwrap();
    let most = first
        .timeline
        .iter()
        .map(|s| s.in_flight)
        .max()
        .unwrap_or(0);
    assert!(
        most > u64::from(config.downstream_workers),
        "{most} calls in flight"
    );

    let incident = report.run(Layout::Incident).unwrap();
    assert!(
        incident.breaker_first_open.is_some(),
        "the incident layout's breaker never opened: {}",
        incident.reconciliation()
    );
    assert!(incident.counts.not_permitted > 0);

    for layout in [Layout::BulkheadFirst, Layout::BulkheadFirstUnfair] {
        let run = report.run(layout).unwrap();
        // Overload really happened (the bulkhead shed calls), and the breaker stayed closed.
        assert!(run.counts.rejected_bulkhead > 0, "{}", run.reconciliation());
        assert_eq!(run.breaker_first_open, None, "{}", run.reconciliation());
        assert_eq!(run.counts.not_permitted, 0);
    }

    // The retry inside admission control adds few attempts (it retries only the downstream's
    // own failures and time-outs); outside it, retrying refusals, it multiplies them.
    let full = report.run(Layout::FullStack).unwrap();
    let spring = report.run(Layout::SpringDefault).unwrap();
    assert!(
        full.attempts_per_call() < spring.attempts_per_call(),
        "{} vs {}",
        full.attempts_per_call(),
        spring.attempts_per_call()
    );
    assert!(full.attempts_per_call() < 1.5, "{}", full.reconciliation());
    assert!(
        spring.breaker_first_open.is_some(),
        "{}",
        spring.reconciliation()
    );
    assert!(full.counts.succeeded > spring.counts.succeeded);
}

#[test]
fn the_binary_runs_quick_and_writes_the_json_report() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("overload-drill-{}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_overload-drill"))
        .args(["--quick", "--duration", "1.5", "--json"])
        .arg(&path)
        .output()
        .expect("the binary starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("breaker opened"), "no table:\n{stdout}");
    // Readable in a terminal of 100 columns, as written to a file or a pipe (no progress bars).
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= resilience_examples::drill::WIDTH,
            "a line over {} columns:\n{line}",
            resilience_examples::drill::WIDTH
        );
    }

    let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    let runs = json["runs"].as_array().expect("a `runs` array");
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "incident-layout",
            "bulkhead-first",
            "bulkhead-first-unfair",
            "full-stack",
            "spring-default"
        ]
    );
    for run in runs {
        let count = |key: &str| {
            run[key]
                .as_u64()
                .unwrap_or_else(|| panic!("`{key}` is not a count in {run}"))
        };
        let ended = count("succeeded")
            + count("failed")
            + count("rejected_bulkhead")
            + count("not_permitted")
            + count("rate_limited")
            + count("timed_out")
            + count("other_rejected");
        assert_eq!(count("offered"), ended, "{run}");
        let first_open = &run["breaker_first_open_ms"];
        assert!(first_open.is_null() || first_open.is_u64(), "{run}");
    }
    assert!(runs[0]["breaker_first_open_ms"].is_u64(), "{}", runs[0]);
    assert!(runs[1]["breaker_first_open_ms"].is_null(), "{}", runs[1]);
}

#[test]
fn the_adaptive_comparison_measures_each_adaptive_limit_against_the_best_fixed_one() {
    let config = DrillConfig {
        layouts: vec![
            Layout::Fixed(10),
            Layout::Fixed(20),
            Layout::Adaptive(resilience_runtime::LimitAlgorithm::Gradient2, 5),
            Layout::Adaptive(resilience_runtime::LimitAlgorithm::Knee, 5),
            Layout::Adaptive(resilience_runtime::LimitAlgorithm::Aimd, 60),
            Layout::TowerAcc(5),
        ],
        degradation: 0.4,
        recovery: Some(0.75),
        duration: Duration::from_millis(1200),
        ..small()
    };
    let report = drill::run(&config, &()).expect("the drill runs");
    print!("{}", report.table());
    for line in report.reading() {
        println!("{line}");
    }
    for run in &report.runs {
        assert!(run.reconciles(), "{}", run.reconciliation());
        // Under the limit the run had at each reading (a lower limit revokes no permit, so
        // the calls in flight may exceed it by what it just shed).
        let highest = run.timeline.iter().map(|s| s.limit).max().unwrap_or(0);
        let most = run.timeline.iter().map(|s| s.in_flight).max().unwrap_or(0);
        assert!(
            most <= u64::from(highest),
            "{}: {most} in flight",
            run.layout
        );
    }
    // A fixed limit holds still; an adaptive one moves from where it started.
    let fixed = report.run(Layout::Fixed(20)).unwrap();
    assert!(fixed.timeline.iter().all(|s| s.limit == 20));
    for run in report.runs.iter().filter(|r| r.layout.is_adaptive()) {
        let (Layout::Adaptive(_, initial) | Layout::TowerAcc(initial)) = run.layout else {
            unreachable!()
        };
        assert!(
            run.timeline.iter().any(|s| s.limit != initial),
            "{}: the limit never moved",
            run.layout
        );
    }
    let best = report.best_fixed().expect("fixed layouts ran");
    assert!(matches!(best.layout, Layout::Fixed(_)));
    let verdicts = report.adaptive_verdicts();
    assert_eq!(verdicts.len(), 4);
    for verdict in &verdicts {
        assert_eq!(verdict.best_fixed, best.layout);
        assert!(verdict.throughput_share > 0.0);
        assert!(report.reading().contains(&verdict.line()));
    }
    let json = report.json();
    assert_eq!(json["config"]["recovery"], 0.75);
    assert!(json["runs"][2]["timeline"][0]["limit"].is_u64());
}

#[test]
fn layouts_are_named_and_found_by_their_names() {
    for layout in Layout::ALL.into_iter().chain(Layout::ADAPTIVE) {
        assert_eq!(Layout::from_name(&layout.name()), Some(layout), "{layout}");
    }
    assert_eq!(Layout::from_name("fixed-0"), None);
    assert_eq!(Layout::from_name("vegas-from-501"), None);
    assert_eq!(Layout::from_name("gradient3-from-10"), None);
}

/// The slow-tail drill, small: in virtual time, so its latencies are exact and repeatable.
#[test]
fn hedging_cuts_the_slow_tail_and_its_budget_caps_the_extra_load() {
    use resilience_examples::drill::slow_tail::{self, SlowTailConfig, Table};
    let config = SlowTailConfig {
        calls: 4_000,
        ..SlowTailConfig::default()
    };
    let runs = slow_tail::run(&config);
    print!("{}", Table(&runs));
    assert_eq!(
        runs,
        slow_tail::run(&config),
        "the same seed, the same runs"
    );
    let [plain, hedged, plain_incident, hedged_incident] = &runs[..] else {
        panic!("two layouts on two tails");
    };
    for run in &runs {
        assert_eq!(run.succeeded, u64::from(config.calls), "{}", run.layout);
    }
    assert!(
        hedged.p99 * 2 < plain.p99,
        "the hedge cuts the p99: {:?} against {:?}",
        hedged.p99,
        plain.p99
    );
    assert_eq!(plain.attempts, u64::from(config.calls));
    assert!(hedged.extra_load() > 0.0 && hedged.extra_load() <= config.budget_ratio);
    // In an incident's tail the budget refuses most of the extra attempts the delay asks for.
    assert!(hedged_incident.over_budget > 0);
    assert!(hedged_incident.extra_load() <= config.budget_ratio);
    assert_eq!(plain_incident.extra_load(), 0.0);
}

/// The shipped incident, replayed as the README tells it: the deployed guards open the breaker
/// on the bulkhead's refusals during the surge, the team's fix does not, and the adaptive
/// layout does not need the fix. The profile from 12:02 to 12:07, the surge's first four
/// minutes, to keep the test command fast in a debug build; the README's run is the whole of
/// it.
#[test]
fn the_shipped_incident_replays_as_the_readme_tells() {
    use resilience_examples::drill::replay::{self, GuardFile, Profile, ReplayConfig, Variant};
    let text = std::fs::read_to_string("profiles/incident.csv").unwrap();
    let surge: String = text
        .lines()
        .filter(|line| {
            let time = line.split(',').next().unwrap_or("");
            !line.starts_with("2024")
                || ("2024-03-14T12:02:00Z"..="2024-03-14T12:07:00Z").contains(&time)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let profile = Profile::from_csv(&surge).unwrap();
    assert_eq!(profile.duration().as_secs(), 310);
    let files = [
        "config/incident-deployed.toml",
        "config/incident-tuned.toml",
    ]
    .map(|path| GuardFile::read(path).unwrap())
    .to_vec();
    let config = ReplayConfig {
        variants: vec![Variant::Adaptive],
        ..ReplayConfig::new(files, profile)
    };
    let report = replay::run(&config, &mut |_| {}).unwrap();
    let run = |name: &str| report.runs.iter().find(|r| r.name == name).unwrap();
    assert!(report.reconciles());

    let deployed = run("incident-deployed").breaker.unwrap();
    let opening = deployed
        .opening
        .expect("the deployed guards open the breaker");
    let opened = report.profile.clock_time(opening.at);
    assert!(
        ("12:03:00".."12:05:00").contains(&opened.as_str()),
        "in the surge: {opened}"
    );
    assert!(
        opening.bulkhead_refusals * 2 > opening.failures(),
        "on the bulkhead's refusals: {opening:?}"
    );
    let tuned = run("incident-tuned");
    assert_eq!(tuned.breaker.unwrap().first_open, None, "the fix holds");
    let adaptive = run("incident-deployed/adaptive");
    assert_eq!(adaptive.breaker.unwrap().first_open, None);
    assert!(
        adaptive.counts.succeeded as f64 >= 0.99 * tuned.counts.succeeded as f64,
        "the adaptive limit serves what the fix does, from the incident's 50: {} against {}",
        adaptive.counts.succeeded,
        tuned.counts.succeeded
    );
    assert!(run("incident-deployed").counts.succeeded * 3 < tuned.counts.succeeded * 2);
}

/// The binary's standard output, once it exited with success (else its output and errors).
fn succeeded(output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_binary_replays_a_profile_against_the_files_and_refuses_a_bad_row_by_its_line() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let id = std::process::id();
    let profile = dir.join(format!("profile-{id}.csv"));
    let mut text = String::from("time,requests_per_second,p50_ms,p99_ms,error_rate,workers\n");
    for t in (0..40).step_by(5) {
        let (rate, p50) = if t < 15 { (200, 20) } else { (900, 80) };
        text.push_str(&format!("{t},{rate},{p50},{},0.01,100\n", p50 * 3));
    }
    std::fs::write(&profile, &text).unwrap();
    let json = dir.join(format!("replay-{id}.json"));
    let svg = dir.join(format!("replay-{id}.svg"));
    let output = Command::new(env!("CARGO_BIN_EXE_overload-drill"))
        .args(["--config", "config/incident-deployed.toml", "--profile"])
        .arg(&profile)
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .expect("the binary starts");
    let stdout = succeeded(&output);
    assert!(
        stdout.contains("open loop"),
        "says which load ran:\n{stdout}"
    );
    assert!(
        stdout.contains("incident-deployed: the breaker opened after"),
        "{stdout}"
    );
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= resilience_examples::drill::WIDTH,
            "a line over {} columns:\n{line}",
            resilience_examples::drill::WIDTH
        );
    }
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let names: Vec<&str> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "incident-deployed",
            "incident-deployed/default-order",
            "incident-deployed/adaptive",
            "incident-deployed/spring-order"
        ]
    );
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains(">incident-deployed/adaptive<"));

    std::fs::write(&profile, text.replace("25,900,80", "25,900,eighty")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_overload-drill"))
        .args(["--config", "config/incident-deployed.toml", "--profile"])
        .arg(&profile)
        .output()
        .expect("the binary starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 7, column `p50_ms`: `eighty` is not a number"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing ran");
    for path in [&profile, &json, &svg] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn the_binary_replays_prometheus_exports_one_per_column() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let id = std::process::id();
    let matrix = |values: &[(u64, &str)]| {
        let values: Vec<String> = values
            .iter()
            .map(|(t, v)| format!("[{t},\"{v}\"]"))
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[{{"metric":{{}},"values":[{}]}}]}}}}"#,
            values.join(",")
        )
    };
    let t0 = 1_710_417_780; // 2024-03-14T12:03:00Z
    let rate = dir.join(format!("rate-{id}.json"));
    let p50 = dir.join(format!("p50-{id}.json"));
    let json = dir.join(format!("prometheus-replay-{id}.json"));
    std::fs::write(
        &rate,
        matrix(&[(t0, "50"), (t0 + 15, "80"), (t0 + 30, "60")]),
    )
    .unwrap();
    std::fs::write(&p50, matrix(&[(t0, "0.020"), (t0 + 30, "NaN")])).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_overload-drill"))
        .args(["--config", "config/incident-deployed.toml", "--profile"])
        .arg(format!("requests_per_second={}", rate.display()))
        .arg("--profile")
        .arg(format!("p50_seconds={}", p50.display()))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("the binary starts");
    let stdout = succeeded(&output);
    assert!(
        stdout.contains("3 steps over 45 s (from 12:03:00 UTC), 2850 requests offered"),
        "{stdout}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for run in report["runs"].as_array().unwrap() {
        assert_eq!(run["offered"], 2850, "{run}");
        assert_eq!(run["reconciles"], true, "{run}");
    }

    let output = Command::new(env!("CARGO_BIN_EXE_overload-drill"))
        .args(["--config", "config/incident-deployed.toml", "--profile"])
        .arg(format!("p99_ms={}", p50.display()))
        .output()
        .expect("the binary starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`p99_ms`: not a column of a profile; a Prometheus export is one of"),
        "{stderr}"
    );
    for path in [&rate, &p50, &json] {
        let _ = std::fs::remove_file(path);
    }
}
