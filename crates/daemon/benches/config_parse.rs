//! Parsing a config of many rules: the time per rule stays the same from 1,000 to 40,000
//! rules (linear in the file), where each rule used to search all those before it (40,000
//! rules took 80 s, on the loop thread at each SIGHUP).
//!
//! Each rule has one condition (`min_threads`), as a generated config would; criterion
//! reports the time per rule.
//!
//! ```text
//! cargo bench -p threadbalance-daemon --bench config_parse -- --warm-up-time 1 --measurement-time 3
//! ```

// Bench code: a failed setup is a failed run.
#![allow(clippy::expect_used)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use threadbalance_daemon::Config;

fn many_rules(n: usize) -> String {
    let mut text = String::from("[daemon]\nobserve = true\n");
    for i in 0..n {
        text.push_str(&format!(
            "\n[[rule]]\nname = \"r{i}\"\nmin_threads = {}\npolicy = \"tumbler\"\n",
            i + 1
        ));
    }
    text
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("config_parse");
    group.sample_size(10);
    for n in [1_000, 10_000, 40_000] {
        let text = many_rules(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| Config::parse("bench.toml", text).expect("a valid config"));
        });
    }
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
