//! Automatic NUMA balancing's scanner state, per thread and per application's shared
//! data; the scanning itself is in [`crate::autonuma`].

use threadbalance_model::Nanos;

/// `numa_balancing_scan_delay_ms` and `numa_balancing_scan_period_min_ms`, ns.
pub(crate) const SCAN_MIN_NS: Nanos = Nanos::from_secs(1);

/// Per-thread state of the scanner.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scan {
    /// When the next scan is due.
    pub next: Nanos,
    /// The scan period.
    pub period: Nanos,
    /// The node the last scan saw (`None`: none yet).
    pub last_node: Option<u32>,
    /// CPU time of the thread at its last scan, ns.
    pub run_at_scan: Nanos,
    /// CPU time of the thread at its application's last shared-data pass, ns.
    pub run_at_shared_pass: Nanos,
}

impl Scan {
    pub(crate) fn new(born: Nanos) -> Scan {
        Scan {
            next: born + SCAN_MIN_NS,
            period: SCAN_MIN_NS,
            last_node: None,
            run_at_scan: Nanos::ZERO,
            run_at_shared_pass: Nanos::ZERO,
        }
    }
}

/// Per-application state for its shared data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedScan {
    /// The node that held most of the application's CPU time at the last pass (`None`:
    /// no node held most).
    pub last_node: Option<u32>,
    /// When the next pass is due.
    pub next: Nanos,
    /// The scan period.
    pub period: Nanos,
}

impl SharedScan {
    pub(crate) fn new(start: Nanos) -> SharedScan {
        SharedScan {
            last_node: None,
            next: start + SCAN_MIN_NS,
            period: SCAN_MIN_NS,
        }
    }
}
