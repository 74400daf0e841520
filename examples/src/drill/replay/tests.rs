use super::*;

/// The incident's guards: the breaker outside a bulkhead of `calls` with a 200 ms wait,
/// recording its refusals.
fn deployed(calls: u32) -> GuardFile {
    GuardFile::from_toml(
        format!("deployed-{calls}"),
        format!(
            r#"
            [bulkhead.instances.orders]
            max_concurrent_calls = {calls}
            max_wait_duration = "200ms"

            [circuit_breaker.instances.orders]
            failure_rate_threshold = 50
            sliding_window_size = 50
            minimum_number_of_calls = 20
            wait_duration_in_open_state = "5s"
            record_rejections = true

            [precedence]
            circuit_breaker = 50
            "#
        ),
    )
}

/// 20 s at 100 requests a second (10 ms), then 40 s at 400 (50 ms, p99 150 ms), 1 % errors:
/// a surge that needs about 20 calls at once.
fn surge() -> Profile {
    let mut text = String::from("time,requests_per_second,p50_ms,p99_ms,error_rate\n");
    for t in (0..60).step_by(5) {
        let (rate, p50, p99) = if t < 20 {
            (100, 10, 30)
        } else {
            (400, 50, 150)
        };
        text.push_str(&format!("{t},{rate},{p50},{p99},0.01\n"));
    }
    Profile::from_csv(&text).unwrap()
}

fn replay(config: &ReplayConfig) -> ReplayReport {
    run(config, &mut |_| {}).unwrap()
}

#[test]
fn every_arrival_ends_in_one_outcome_and_the_profile_is_offered_whole() {
    let config = ReplayConfig::new(vec![deployed(10)], surge());
    let report = replay(&config);
    let names: Vec<&str> = report.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "deployed-10",
            "deployed-10/default-order",
            "deployed-10/adaptive",
            "deployed-10/spring-order"
        ]
    );
    let integral = config.profile.offered();
    for run in &report.runs {
        assert!(run.reconciles(), "{}: {:?}", run.name, run.counts);
        assert_eq!(run.counts.offered as f64, integral.round(), "{}", run.name);
        assert_eq!(
            run.counts.offered,
            run.counts.ended(),
            "{}: every call ended",
            run.name
        );
        assert!(run.elapsed >= config.profile.duration(), "{}", run.name);
    }
}

#[test]
fn the_breaker_outside_the_bulkhead_opens_on_its_refusals_and_the_findings_say_so() {
    let config = ReplayConfig::new(vec![deployed(10), deployed(40)], surge());
    let report = replay(&config);
    let run = |name: &str| report.runs.iter().find(|r| r.name == name).unwrap();

    let incident = run("deployed-10").breaker.unwrap();
    let opening = incident
        .opening
        .expect("the surge opens the breaker outside 10 calls");
    assert!(
        opening.bulkhead_refusals > 2 * opening.dependency_failures,
        "{opening:?}"
    );
    assert_eq!(opening.window_calls, 50, "its count window was full");
    assert!(
        incident.first_open.unwrap() > Duration::from_secs(20),
        "not before the surge"
    );
    let findings = report.findings();
    assert!(
        findings[0].contains("on rejections, not on failures")
            && findings[0].contains("the bulkhead's refusals"),
        "{}",
        findings[0]
    );
    // Bulkhead first, the same 10 calls: the breaker never sees a refusal.
    assert_eq!(
        run("deployed-10/default-order").breaker.unwrap().first_open,
        None
    );
    // The same layout with room for the surge does not open either.
    assert_eq!(run("deployed-40").breaker.unwrap().first_open, None);
    assert!(run("deployed-40").counts.succeeded > run("deployed-10").counts.succeeded);
    let adaptive = run("deployed-10/adaptive");
    let (start, _, high, _) = adaptive.limit.expect("an adaptive limit");
    assert_eq!(start, 10);
    assert!(
        high > 10,
        "the adaptive limit rose above 10 for the surge: {high}"
    );
    assert_eq!(adaptive.breaker.unwrap().first_open, None);
    assert!(findings
        .last()
        .unwrap()
        .starts_with("Most successes without the breaker opening"));
}

#[test]
fn the_same_seed_and_profile_give_the_same_report() {
    let config = ReplayConfig::new(vec![deployed(10)], surge());
    let without_wall = |report: &ReplayReport| {
        let mut json = report.json();
        for run in json["runs"].as_array_mut().unwrap() {
            run.as_object_mut().unwrap().remove("wall_ms");
        }
        json
    };
    let first = replay(&config);
    let second = replay(&config);
    assert_eq!(without_wall(&first), without_wall(&second));
    assert_eq!(first.findings(), second.findings());
    let other = replay(&ReplayConfig { seed: 7, ..config });
    assert_ne!(without_wall(&first), without_wall(&other));
}

#[test]
fn a_closed_loop_offers_less_when_the_service_slows_and_an_open_loop_does_not() {
    // 100 a second, answered in 400 ms by a dependency of 10 workers (25 a second).
    let profile =
        Profile::from_csv("time,requests_per_second,p50_ms,workers\n0,100,400,10\n10,100,400,10\n")
            .unwrap();
    let file = GuardFile::from_toml(
        "slow",
        "[time_limiter.instances.orders]\ntimeout_duration = \"5s\"\n",
    );
    let open = ReplayConfig {
        variants: Vec::new(),
        ..ReplayConfig::new(vec![file], profile)
    };
    let closed = ReplayConfig {
        load: Load::Closed { callers: 20 },
        ..open.clone()
    };
    let (open, closed) = (&replay(&open).runs[0], &replay(&closed).runs[0]);
    assert_eq!(
        open.counts.offered, 2000,
        "the profile's 20 s at 100 a second"
    );
    assert!(
        closed.counts.offered < open.counts.offered / 2,
        "20 callers waiting on 400 ms answers and a queue offer far less: {}",
        closed.counts.offered
    );
    assert!(
        open.counts.timed_out > 0,
        "the open loop's queue grows past the time limit"
    );
    assert!(closed.reconciles() && open.reconciles());
}

#[test]
fn the_instance_must_be_clear_and_a_refused_file_is_named() {
    let two = GuardFile::from_toml(
        "two",
        "[bulkhead.instances.orders]\n[bulkhead.instances.payments]\n",
    );
    let error = run(&ReplayConfig::new(vec![two.clone()], surge()), &mut |_| {}).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`two`: names `orders`, `payments`: say which instance the handler's guards are (--instance NAME)"
    );
    let config = ReplayConfig {
        instance: Some("stock".into()),
        ..ReplayConfig::new(vec![two], surge())
    };
    let error = run(&config, &mut |_| {}).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`two`: configures no instance `stock`; it names `orders`, `payments`"
    );
    let bad = GuardFile::from_toml(
        "bad",
        "[bulkhead.instances.orders]\nmax_concurrent_calls = 0\n",
    );
    let error = run(&ReplayConfig::new(vec![bad], surge()), &mut |_| {}).unwrap_err();
    assert!(
        error.to_string().starts_with("`bad` refused: ")
            && error.to_string().contains("max_concurrent_calls"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_dependencys_workers_follow_the_profile() {
    let profile = Profile::from_csv(
        "time,requests_per_second,p50_ms,workers\n0,1,10,4\n10,1,10,6\n20,1,10,2\n",
    )
    .unwrap();
    let workers = Arc::new(Semaphore::new(4));
    let dependency = Arc::new(Dependency {
        profile,
        seed: 1,
        started: Instant::now(),
        workers: Some(Arc::clone(&workers)),
        in_flight: AtomicU64::new(0),
        served: AtomicU64::new(0),
        answered: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    tokio::spawn(Arc::clone(&dependency).follow_workers());
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(workers.available_permits(), 6);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        workers.available_permits(),
        2,
        "fewer workers once they are free"
    );
}

#[test]
fn every_arrival_of_a_light_load_is_made_the_last_included() {
    // One request a second, answered in 10 ms: the last arrival finds every earlier call ended.
    let profile = Profile::from_csv("time,requests_per_second,p50_ms\n0,1,10\n5,1,10\n").unwrap();
    let file = GuardFile::from_toml("light", "[bulkhead.instances.orders]\n");
    let report = replay(&ReplayConfig {
        variants: Vec::new(),
        ..ReplayConfig::new(vec![file], profile)
    });
    let run = &report.runs[0];
    assert_eq!(run.counts.offered, 10);
    assert_eq!(run.counts.succeeded, 10);
    assert_eq!(run.dependency_served, 10);
    assert!(run.reconciles());
}

#[test]
fn closed_loop_callers_waiting_through_a_quiet_step_still_meet_the_surge_after_it() {
    // A minute at one request every 100 s, then 30 s at 200 a second.
    let profile =
        Profile::from_csv("time,requests_per_second,p50_ms\n0,0.01,10\n60,200,10\n75,200,10\n")
            .unwrap();
    let file = GuardFile::from_toml("surge", "[bulkhead.instances.orders]\n");
    let report = replay(&ReplayConfig {
        variants: Vec::new(),
        load: Load::Closed { callers: 20 },
        ..ReplayConfig::new(vec![file], profile)
    });
    let offered = report.runs[0].counts.offered;
    assert!(
        offered > 4_000,
        "the callers' long pauses end at the surge, which they then offer: {offered}"
    );
}

#[test]
fn a_breaker_that_opens_on_time_outs_says_so() {
    // Spring's order puts the time limiter (100 ms) around a bulkhead of 5 that makes calls
    // wait up to a second: the calls still waiting are cut off, and the breaker, outside both,
    // records each cut-off as a failure.
    let file = GuardFile::from_toml(
        "waits",
        r#"
        [bulkhead.instances.orders]
        max_concurrent_calls = 5
        max_wait_duration = "1s"
        [circuit_breaker.instances.orders]
        sliding_window_size = 50
        minimum_number_of_calls = 20
        [time_limiter.instances.orders]
        timeout_duration = "100ms"
        "#,
    );
    let config = ReplayConfig {
        variants: vec![Variant::SpringOrder],
        ..ReplayConfig::new(vec![file], surge())
    };
    let report = replay(&config);
    let spring = &report.runs[1];
    assert_eq!(spring.name, "waits/spring-order");
    let opening = spring.breaker.unwrap().opening.expect("it opens");
    assert!(opening.time_outs * 2 > opening.failures(), "{opening:?}");
    assert_eq!(
        opening.bulkhead_refusals, 0,
        "no call waited its whole second"
    );
    let findings = report.findings();
    assert!(
        findings[1].contains("on time-outs")
            && findings[1].contains("the time limiter wraps the bulkhead"),
        "{}",
        findings[1]
    );
    // This project's order, the same guards: the time limiter bounds the dependency alone.
    assert_eq!(report.runs[0].breaker.unwrap().first_open, None);
}
