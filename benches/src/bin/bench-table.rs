//! Prints one table from a criterion run of `benches/peers.rs`: the median per case, and for a
//! peer or baseline the ratio of ours to it (below 1.0: ours is cheaper).
//!
//! Reads `<target>/criterion/<group>/<case>/new/{benchmark,estimates}.json`; the target
//! directory is the first argument, else `$CARGO_TARGET_DIR`, else `target`. A case whose name
//! starts with `ours` is this project; in a group with one such case every other case gets the
//! ratio ours / it; in a group of only our cases (scaling) the spread max / min is printed. The
//! `components` group sizes the parts of a call and gets no ratio. In `guarded_call` the
//! reference is `ours_macro`, and `ours_three_gates` is also printed as a difference with it
//! (the third gate's cost).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The groups in the order the bench runs them; groups not listed follow, sorted.
const ORDER: &[&str] = &[
    "components",
    "breaker_closed",
    "breaker_closed_2threads",
    "bulkhead_admission",
    "rate_limiter_permit",
    "rate_limiter_permit_2threads",
    "guarded_call",
    "open_rejection",
    "rate_limiter_refusal",
    "bulkhead_2threads_1permit",
    "scaling_window",
    "scaling_rate_limiter",
    "scaling_registry",
];

struct Case {
    name: String,
    median_ns: f64,
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn collect(dir: &Path, found: &mut BTreeMap<String, Vec<Case>>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let new = path.join("new");
        if let (Some(bench), Some(est)) = (
            read_json(&new.join("benchmark.json")),
            read_json(&new.join("estimates.json")),
        ) {
            let group = bench["group_id"].as_str().unwrap_or("?").to_string();
            let name = bench["function_id"]
                .as_str()
                .or_else(|| bench["title"].as_str())
                .unwrap_or("?")
                .to_string();
            if let Some(median_ns) = est["median"]["point_estimate"].as_f64() {
                found
                    .entry(group)
                    .or_default()
                    .push(Case { name, median_ns });
            }
        } else {
            collect(&path, found);
        }
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 10_000.0 {
        format!("{:.1} µs", ns / 1000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

fn main() {
    let target = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"));
    let root = target.join("criterion");
    let mut found = BTreeMap::new();
    collect(&root, &mut found);
    if found.is_empty() {
        eprintln!(
            "no criterion results under {}; run `scripts/bench.sh` (or `cargo bench -p resilience-benches --features peers`) first",
            root.display()
        );
        std::process::exit(1);
    }

    let mut groups: Vec<String> = ORDER
        .iter()
        .map(|g| g.to_string())
        .filter(|g| found.contains_key(g))
        .collect();
    groups.extend(
        found
            .keys()
            .filter(|g| !ORDER.contains(&g.as_str()))
            .cloned(),
    );

    println!("| group | case | median | ours / case |");
    println!("|---|---|---:|---:|");
    for group in groups {
        let mut cases = found.remove(&group).unwrap_or_default();
        // Ours first, then the others from cheapest.
        cases.sort_by(|a, b| {
            (!a.name.starts_with("ours"), a.median_ns)
                .partial_cmp(&(!b.name.starts_with("ours"), b.median_ns))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let ours: Vec<&Case> = cases
            .iter()
            .filter(|c| c.name.starts_with("ours"))
            .collect();
        // The reference "ours" of a group with a peer: the macro-guarded call if there is one.
        let reference = ours
            .iter()
            .find(|c| c.name == "ours_macro")
            .or(ours.first())
            .copied();
        let only_ours = ours.len() == cases.len();
        for case in &cases {
            let ratio = match reference {
                // The parts of a call, not alternatives to one another.
                _ if group == "components" => String::new(),
                Some(r) if !case.name.starts_with("ours") => {
                    format!("{:.2}×", r.median_ns / case.median_ns)
                }
                _ => String::new(),
            };
            println!(
                "| {group} | {} | {} | {ratio} |",
                case.name,
                fmt_ns(case.median_ns)
            );
        }
        if only_ours && cases.len() > 1 && !group.contains("2threads") {
            // The spread across sizes of one kind (`ours_count_10` / `ours_count_10000`), then
            // across every case of the group.
            let mut kinds: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            for case in &cases {
                let kind = case
                    .name
                    .rsplit_once('_')
                    .map_or(case.name.as_str(), |(k, _)| k);
                kinds.entry(kind).or_default().push(case.median_ns);
            }
            if kinds.len() > 1 {
                for (kind, medians) in &kinds {
                    if medians.len() > 1 {
                        println!(
                            "| {group} | spread max / min, {kind}_* | | {:.2}× |",
                            spread(medians)
                        );
                    }
                }
            }
            let all: Vec<f64> = cases.iter().map(|c| c.median_ns).collect();
            println!("| {group} | spread max / min | | {:.2}× |", spread(&all));
        }
        if group == "guarded_call" {
            if let (Some(bare), Some(r)) = (cases.iter().find(|c| c.name == "bare"), reference) {
                println!(
                    "| {group} | {} over bare | {} | |",
                    r.name,
                    fmt_ns(r.median_ns - bare.median_ns)
                );
            }
            // The third gate (the rate limiter) by difference with the two-gate call.
            if let (Some(three), Some(r)) = (
                cases.iter().find(|c| c.name == "ours_three_gates"),
                reference,
            ) {
                println!(
                    "| {group} | {} over {} | {} | |",
                    three.name,
                    r.name,
                    fmt_ns(three.median_ns - r.median_ns)
                );
            }
        }
    }
}

/// The largest median divided by the smallest.
fn spread(medians: &[f64]) -> f64 {
    let min = medians.iter().copied().fold(f64::MAX, f64::min);
    let max = medians.iter().copied().fold(0.0, f64::max);
    max / min
}
