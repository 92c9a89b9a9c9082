//! The leased-budgets simulator (issue 12), long run:
//! `cargo run --release --example lease-sim [scale]` (scale 1.0: one-minute
//! windows, three-minute runs). Prints one markdown row per scenario, with
//! lease = "auto" and, for comparison, lease = "off" (with GCRA where the
//! limit is above 10,000: a sliding log that large is coalesced, and
//! reading a 10,000-entry row per call is the cost leases avoid).

use tollgate::internals::protocol::Algorithm;
use tollgate::internals::sim::{run, scenarios, Scenario};

/// Limits above this are compared with GCRA when leases are off.
const LARGE: u32 = 10_000;

fn main() {
    let scale = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    println!("| scenario | lease | requests | admitted | ideal | under % | worst window / limit | over | object calls/s (busiest s) | max queue ms | failed calls | on_error | latency p50 / p99 ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for scenario in scenarios(scale) {
        // Without leases, a limit above 10,000 is compared with GCRA, the
        // O(1) row such budgets used before the sliding log coalesced; its
        // worst window can reach 2N − 1 by design.
        let off = if scenario.limit.requests.get() > LARGE {
            ("off (gcra)", Scenario { lease: None, algorithm: Algorithm::Gcra, ..scenario.clone() })
        } else {
            ("off", Scenario { lease: None, ..scenario.clone() })
        };
        for (label, s) in [("auto", scenario.clone()), off] {
            let started = std::time::Instant::now();
            let r = run(&s);
            println!(
                "| {} | {label} | {} | {} | {} | {:.2} | {} / {} | {} | {:.0} ({}) | {:.1} | {} | {} | {:.1} / {:.1} |",
                s.name,
                r.requests,
                r.admitted,
                r.ideal_admitted,
                r.under_percent(),
                r.worst_window,
                r.limit,
                r.over(),
                r.calls_per_s,
                r.busiest_second,
                r.max_queue_ms,
                r.failed_calls,
                r.on_error,
                r.latency_p50_ms,
                r.latency_p99_ms,
            );
            eprintln!("  ({} {label}: {:.1} s)", s.name, started.elapsed().as_secs_f64());
        }
    }
}
