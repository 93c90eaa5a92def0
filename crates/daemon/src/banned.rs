//! CPUs the daemon never places a thread on: those the administrator set apart for the
//! kernel's isolation (`isolcpus=`, `nohz_full=`), plus the config's own `banned_cpus`.
//!
//! irqbalance bans the same CPUs by default, for the same reason: a CPU isolated at boot
//! runs one latency-critical thread, and a balancer that moves work onto it undoes the
//! isolation. The kernel tells us in two places, and the default ban is their union:
//!
//! ```text
//!  /proc/cmdline                          isolcpus=domain,managed_irq,2-5 nohz_full=6-7
//!                                                  └─ flags ─────────┘ └cpus┘        └cpus┘
//!  /sys/devices/system/cpu/isolated       2-5      (isolcpus' domain CPUs, as the kernel took them)
//!  /sys/devices/system/cpu/nohz_full      6-7      ("(null)" when there are none)
//!                                         ─────
//!  kernel bans                            2-7      ∪ config banned_cpus  (unless kernel_banned = false)
//! ```
//!
//! Every `isolcpus=` CPU is banned whatever its flags (`managed_irq` alone isolates only
//! from managed interrupts, but it still marks a CPU its administrator set apart).
//!
//! ```
//! use threadbalance_daemon::banned::parse_kernel_cmdline;
//! let b = parse_kernel_cmdline("BOOT_IMAGE=/vmlinuz isolcpus=domain,managed_irq,2-5 nohz_full=6-7\n").unwrap();
//! assert_eq!(b.isolcpus.to_string(), "2-5");
//! assert_eq!(b.isolcpus_flags, ["domain", "managed_irq"]);
//! assert_eq!(b.nohz_full.to_string(), "6-7");
//! ```

use crate::config::DaemonSettings;
use crate::error::ParseError;
use threadbalance_model::CpuSet;

/// What the kernel command line asks to isolate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmdlineBans {
    /// CPUs of every `isolcpus=` (all occurrences together).
    pub isolcpus: CpuSet,
    /// The flags given before `isolcpus=`'s CPU list (`nohz`, `domain`, `managed_irq`),
    /// in order, unknown ones included (the kernel skips them with a warning).
    pub isolcpus_flags: Vec<String>,
    /// CPUs of every `nohz_full=`.
    pub nohz_full: CpuSet,
}

/// Everything the kernel says about isolated CPUs: the command line and sysfs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelBans {
    /// From `/proc/cmdline`.
    pub cmdline: CmdlineBans,
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: CpuSet,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: CpuSet,
}

impl KernelBans {
    /// The union of every kernel source.
    pub fn all(&self) -> CpuSet {
        self.cmdline
            .isolcpus
            .union(&self.cmdline.nohz_full)
            .union(&self.isolated)
            .union(&self.nohz_full)
    }
}

/// Splits a kernel command line into parameters as the kernel's `next_arg` does:
/// whitespace separates, double quotes group (and are dropped), and `--` ends the kernel's
/// part (what follows is init's).
fn kernel_params(text: &str) -> Vec<String> {
    let mut params = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    params.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            c => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        params.push(current);
    }
    if let Some(end) = params.iter().position(|p| p == "--") {
        params.truncate(end);
    }
    params
}

/// Parses `isolcpus=`'s value: flags (words) first, each followed by a comma, then a CPU
/// list, as the kernel's `housekeeping_isolcpus_setup` reads it.
fn parse_isolcpus(value: &str) -> Result<(Vec<String>, CpuSet), ParseError> {
    let mut flags = Vec::new();
    let mut rest = value;
    while rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let Some((flag, after)) = rest.split_once(',') else {
            return Err(ParseError::IsolcpusFlag {
                value: value.to_string(),
                flag: rest.to_string(),
            });
        };
        flags.push(flag.to_string());
        rest = after;
    }
    let cpus = CpuSet::parse_list(rest).map_err(|source| ParseError::ParamCpus {
        param: "isolcpus",
        value: value.to_string(),
        source,
    })?;
    Ok((flags, cpus))
}

/// Parses `/proc/cmdline` for `isolcpus=` and `nohz_full=`; a value that is not a CPU list
/// is an error naming the parameter.
pub fn parse_kernel_cmdline(text: &str) -> Result<CmdlineBans, ParseError> {
    let mut bans = CmdlineBans::default();
    for param in kernel_params(text) {
        if let Some(value) = param.strip_prefix("isolcpus=") {
            let (flags, cpus) = parse_isolcpus(value)?;
            bans.isolcpus_flags.extend(flags);
            bans.isolcpus = bans.isolcpus.union(&cpus);
        } else if let Some(value) = param.strip_prefix("nohz_full=") {
            let cpus = CpuSet::parse_list(value).map_err(|source| ParseError::ParamCpus {
                param: "nohz_full",
                value: value.to_string(),
                source,
            })?;
            bans.nohz_full = bans.nohz_full.union(&cpus);
        }
    }
    Ok(bans)
}

/// Parses `/sys/devices/system/cpu/{isolated,nohz_full}`: a CPU list, empty or `(null)`
/// when there is none.
///
/// ```
/// use threadbalance_daemon::banned::parse_sysfs_cpus;
/// assert_eq!(parse_sysfs_cpus("2-5\n").unwrap().to_string(), "2-5");
/// assert!(parse_sysfs_cpus("(null)\n").unwrap().is_empty());
/// assert!(parse_sysfs_cpus("\n").unwrap().is_empty());
/// ```
pub fn parse_sysfs_cpus(text: &str) -> Result<CpuSet, ParseError> {
    match text.trim() {
        "(null)" => Ok(CpuSet::new()),
        list => CpuSet::parse_list(list).map_err(ParseError::Cpus),
    }
}

/// The CPUs never used: the config's `banned_cpus`, plus the kernel's unless the config
/// says `kernel_banned = false`.
pub fn banned_cpus(settings: &DaemonSettings, kernel: &KernelBans) -> CpuSet {
    match settings.kernel_banned {
        true => settings.banned_cpus.union(&kernel.all()),
        false => settings.banned_cpus.clone(),
    }
}

/// The CPUs the daemon may place threads on: the config's `cpus` (or every online CPU),
/// online, less the banned ones. None left is an error saying what took them.
///
/// ```
/// use threadbalance_daemon::{Config, banned::{KernelBans, usable_cpus}};
/// use threadbalance_model::CpuSet;
/// let c = Config::parse("t.toml", "[daemon]\ncpus = \"0-7\"\nbanned_cpus = \"0\"\n").unwrap();
/// let mut kernel = KernelBans::default();
/// kernel.isolated = CpuSet::parse_list("6-7").unwrap();
/// let online = CpuSet::parse_list("0-15").unwrap();
/// // 0-7 ∩ online = 0-7, less banned {0} ∪ {6,7} = 1-5
/// assert_eq!(usable_cpus(&online, &c.daemon, &kernel).unwrap().to_string(), "1-5");
/// ```
pub fn usable_cpus(
    online: &CpuSet,
    settings: &DaemonSettings,
    kernel: &KernelBans,
) -> Result<CpuSet, NoCpuLeft> {
    let wanted = match &settings.cpus {
        Some(cpus) => cpus.intersection(online),
        None => online.clone(),
    };
    let banned = banned_cpus(settings, kernel);
    let usable = wanted.difference(&banned);
    if usable.is_empty() {
        return Err(NoCpuLeft {
            cpus: settings.cpus.clone(),
            online: online.clone(),
            banned,
            config: settings.banned_cpus.clone(),
            kernel: kernel.all(),
        });
    }
    Ok(usable)
}

/// No CPU is left to the daemon: what it asked for, less what is banned, and who banned
/// them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "no CPU left to use: cpus {} (online {online}) less banned {banned} (config {}, kernel {})",
    cpus.as_ref().map_or("all".to_string(), |c| c.to_string()),
    shown(config),
    shown(kernel)
)]
pub struct NoCpuLeft {
    /// The config's `cpus` (`None`: all).
    pub cpus: Option<CpuSet>,
    /// The online CPUs.
    pub online: CpuSet,
    /// Every banned CPU.
    pub banned: CpuSet,
    /// Those the config bans.
    pub config: CpuSet,
    /// Those the kernel keeps to itself (`isolcpus=`, `nohz_full=`).
    pub kernel: CpuSet,
}

/// A CPU list for a message: `none` when empty.
fn shown(set: &CpuSet) -> String {
    match set.is_empty() {
        true => "none".to_string(),
        false => set.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn set(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    #[test]
    fn parse_kernel_cmdline_isolcpus_forms_give_their_cpus_and_flags() {
        // (command line, isolcpus, flags)
        let cases: [(&str, &str, &[&str]); 6] = [
            ("isolcpus=1,3-4", "1,3-4", &[]),
            ("isolcpus=nohz,domain,1,3-4", "1,3-4", &["nohz", "domain"]),
            (
                "isolcpus=domain,managed_irq,2-5",
                "2-5",
                &["domain", "managed_irq"],
            ),
            ("isolcpus=managed_irq,7", "7", &["managed_irq"]),
            ("isolcpus=2 isolcpus=4", "2,4", &[]),
            ("quiet splash", "", &[]),
        ];
        for (line, cpus, flags) in cases {
            let b = parse_kernel_cmdline(line).unwrap();
            assert_eq!(b.isolcpus.to_string(), cpus, "{line}");
            assert_eq!(b.isolcpus_flags, flags, "{line}");
        }
    }

    #[test]
    fn parse_kernel_cmdline_quotes_group_and_double_dash_ends() {
        let line = "root=/dev/sda1 \"acpi_osi=Linux x\" nohz_full=\"8-9\" -- isolcpus=1";
        let b = parse_kernel_cmdline(line).unwrap();
        assert_eq!(b.nohz_full.to_string(), "8-9");
        // isolcpus after `--` belongs to init, not to the kernel.
        assert!(b.isolcpus.is_empty());
    }

    #[test]
    fn parse_kernel_cmdline_bad_values_name_the_parameter() {
        assert_eq!(
            parse_kernel_cmdline("isolcpus=domain")
                .unwrap_err()
                .to_string(),
            "isolcpus=domain: flag \"domain\" is not followed by a CPU list"
        );
        let e = parse_kernel_cmdline("nohz_full=5-2")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("nohz_full=5-2: bad CPU list"), "{e}");
    }

    #[test]
    fn banned_cpus_kernel_and_config_are_united_unless_overridden() {
        let kernel = KernelBans {
            cmdline: parse_kernel_cmdline("isolcpus=2-3 nohz_full=4").unwrap(),
            isolated: set("2-3"),
            nohz_full: set("4"),
        };
        let add = Config::parse("t", "[daemon]\nbanned_cpus = \"9\"\n").unwrap();
        // {2,3} ∪ {4} ∪ {9}
        assert_eq!(banned_cpus(&add.daemon, &kernel).to_string(), "2-4,9");
        let only = Config::parse(
            "t",
            "[daemon]\nbanned_cpus = \"9\"\nkernel_banned = false\n",
        )
        .unwrap();
        assert_eq!(banned_cpus(&only.daemon, &kernel).to_string(), "9");
    }

    #[test]
    fn usable_cpus_all_banned_is_an_error_naming_the_sources() {
        let c = Config::parse("t", "[daemon]\ncpus = \"2-3\"\n").unwrap();
        let kernel = KernelBans {
            isolated: set("2-3"),
            ..KernelBans::default()
        };
        let e = usable_cpus(&set("0-3"), &c.daemon, &kernel).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no CPU left to use: cpus 2-3 (online 0-3) less banned 2-3 (config none, kernel 2-3)"
        );
    }

    #[test]
    fn usable_cpus_offline_config_cpus_are_dropped() {
        let c = Config::parse("t", "[daemon]\ncpus = \"0-7\"\n").unwrap();
        // online 0-3: 4-7 are not there to use.
        let usable = usable_cpus(&set("0-3"), &c.daemon, &KernelBans::default()).unwrap();
        assert_eq!(usable.to_string(), "0-3");
    }
}
