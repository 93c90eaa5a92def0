//! Runs one scenario and prints its score: `cargo run -p threadbalance-workload --example
//! workload -- spmd --threads 3 --phase-ms 10 --barrier yield`.
#![allow(clippy::print_stdout)]

use clap::Parser;
use threadbalance_workload::{Scenario, run};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

fn main() {
    let cli = Cli::parse();
    match run(&cli.scenario) {
        Ok(score) => println!("{}", score.to_json_line()),
        Err(e) => {
            eprintln!("workload: {e}");
            std::process::exit(2);
        }
    }
}
