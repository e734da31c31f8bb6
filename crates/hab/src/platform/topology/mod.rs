//! The machine's shape: which logical CPUs share a core, a cluster, a last-level cache, a
//! package, a NUMA node. Read from sysfs, or simulated from a spec such as `4x10x2`.
//!
//! Everything is reduced to one table, indexed by CPU id, of *dense* domain indices per
//! [`Level`]: the domains of a level are numbered `0..n` in order of first appearance by
//! ascending CPU id, so a TLAB refill finds its buffer with one load
//! ([`Topology::domain_of`]).
//!
//! Reading sysfs never fails: a missing or malformed file (containers, offline CPUs, kernels
//! without cache or NUMA information) is replaced by a guess, and each guess is recorded as a
//! warning ([`Topology::warnings`]). The guesses only ever make buffers less shared than they
//! could be, never wrong: any CPU may use any domain's buffer.
//!
//! Here: the levels, the table and its dense numbering. Beside it: `sysfs.rs` (reading a sysfs
//! tree, and the guesses), `cpu_list.rs` (the kernel's cpu list format) and `tests.rs`.

use std::collections::HashMap;
use std::ffi::CStr;
use std::fmt;
use std::hash::Hash;
use std::path::Path;
use std::str::FromStr;

mod cpu_list;
mod raw;
mod sysfs;

use cpu_list::format_cpu_list;
use raw::{CoreKey, CpuFacts, LlcKey, RawCpu, RawCpus};
use sysfs::{kernel_cpu_ids, KernelCpus};

/// A level of the hierarchy between TLABs and the global heap, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// One buffer per logical CPU (hardware thread).
    Cpu,
    /// One buffer per core, shared by its hardware threads (the seed's CLAB).
    Core,
    /// One buffer per last-level cache.
    Llc,
    /// One buffer per processor package (the seed's PLAB).
    Package,
    /// One buffer per NUMA node.
    Node,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 5] = [
        Level::Cpu,
        Level::Core,
        Level::Llc,
        Level::Package,
        Level::Node,
    ];

    /// The level's name as configurations spell it: `cpu`, `core`, `llc`, `package`, `node`.
    pub fn name(self) -> &'static str {
        let name = self.c_name().to_str();
        name.expect("the level names are ASCII")
    }

    /// [`name`](Level::name) as a C string, for the C ABI.
    pub fn c_name(self) -> &'static CStr {
        LEVEL_NAMES[self.index()]
    }

    /// Position in [`Level::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Each level's name, in [`Level::ALL`]'s order: the one table the Rust and C names come from.
const LEVEL_NAMES: [&CStr; Level::ALL.len()] = [c"cpu", c"core", c"llc", c"package", c"node"];

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Level::ALL
            .into_iter()
            .find(|level| level.name() == text)
            .ok_or_else(|| {
                let names: Vec<_> = Level::ALL.into_iter().map(Level::name).collect();
                format!(
                    "{text:?} is not a level; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

/// The most CPUs a simulated machine may have.
const MAX_SIMULATED_CPUS: usize = 4096;

/// Where a topology came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologySource {
    /// Read from sysfs (`/sys/devices/system/cpu` and `/sys/devices/system/node`), with
    /// guesses where it was silent (see [`Topology::warnings`]).
    Sysfs,
    /// Built from a `PxCxT` spec by [`Topology::simulated`].
    Simulated,
    /// Guessed, because sysfs said nothing about CPUs (e.g. a container that masks
    /// `/sys/devices/system/cpu`): every CPU number the kernel can give has a slot, but which
    /// CPUs share a core, cache or package is unknown. Restartable per-CPU buffers stay off.
    Guessed,
}

/// What a CPU slot (a possible CPU id) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// No CPU has this id (a gap in the ids). It shares the domains of the lowest CPU, so a
    /// stray lookup still finds a buffer, and belongs to no domain's CPU list.
    Gap,
    /// A possible CPU that is not online.
    Offline,
    /// An online CPU.
    Online,
}

/// The machine's shape: for every CPU slot, its domain at each [`Level`].
///
/// Built by [`Topology::discover`] (sysfs) or [`Topology::simulated`] (a `PxCxT` spec).
/// Domain indices are dense per level: `0..domains(level)`, numbered in order of first
/// appearance by ascending CPU id.
#[derive(Clone, Debug)]
pub struct Topology {
    source: TopologySource,
    /// Per CPU slot: its dense domain index at each level, indexed by [`Level::index`]. The
    /// table [`Topology::domain_of`] reads on every TLAB refill.
    domains_by_cpu: Vec<[u32; 5]>,
    /// Per level (indexed by [`Level::index`]): how many domains; always at least 1.
    domain_counts: [usize; 5],
    /// Per CPU slot: a gap, an offline CPU or an online one.
    slots: Vec<Slot>,
    /// Per CPU slot: the cluster id sysfs gave (`topology/cluster_id`), for `describe()` only.
    cluster_ids: Vec<Option<i64>>,
    /// What had to be guessed while reading sysfs.
    warnings: Vec<String>,
}

impl Topology {
    /// Reads `/sys/devices/system/cpu` (and `/sys/devices/system/node`).
    ///
    /// Never panics: missing or odd files (containers, offline CPUs, CPU ids with gaps, no
    /// cache information, no NUMA) fall back to what can be known, recording a warning for
    /// each guess. With no CPU information at all, the topology is
    /// [`TopologySource::Guessed`]: a slot for every CPU number the kernel can give (the size
    /// of its CPU mask), each CPU a core of its own, in one package.
    pub fn discover() -> Topology {
        Topology::discover_from(Path::new("/sys"))
    }

    /// The same as [`Topology::discover`], from a sysfs root: `root` plays the role of `/sys`
    /// (for tests, and for topologies captured from other machines).
    pub fn discover_from(root: &Path) -> Topology {
        match sysfs::read(root) {
            Ok((raw, warnings)) => Topology::assemble(TopologySource::Sysfs, raw, warnings),
            Err(warnings) => Topology::fallback(warnings),
        }
    }

    /// A simulated machine from `PxCxT`: packages × cores per package × hardware threads per
    /// core, e.g. `4x10x2` (80 CPUs) or `1x2x1`.
    ///
    /// One last-level cache and one NUMA node per package; every CPU online. CPU ids are
    /// numbered package-major: `cpu = (p × C + c) × T + t`.
    ///
    /// # Errors
    ///
    /// A message naming the problem for a malformed spec, a zero count, or more than 4096
    /// CPUs.
    pub fn simulated(spec: &str) -> Result<Topology, String> {
        let [packages, cores_per_package, threads_per_core] = parse_spec(spec)?;
        let mut raw = Vec::with_capacity(packages * cores_per_package * threads_per_core);
        for package in 0..packages {
            for core in 0..cores_per_package {
                for _thread in 0..threads_per_core {
                    // Counts are at most 4096, so they fit an `i64` id.
                    let (package, core) = (package as i64, core as i64);
                    raw.push(Some(RawCpu {
                        online: true,
                        facts: CpuFacts {
                            core: CoreKey::Ids {
                                package,
                                die: 0,
                                cluster: 0,
                                core,
                            },
                            llc: LlcKey::OfPackage(package),
                            package,
                            node: package,
                            cluster: None,
                        },
                    }));
                }
            }
        }
        Ok(Topology::assemble(
            TopologySource::Simulated,
            raw,
            Vec::new(),
        ))
    }

    /// Where this topology came from.
    pub fn source(&self) -> TopologySource {
        self.source
    }

    /// One more than the largest possible CPU id (ids may have gaps; offline CPUs count).
    /// Always at least 1.
    pub fn cpu_slots(&self) -> usize {
        self.slots.len()
    }

    /// The CPUs that are online, ascending.
    pub fn online_cpus(&self) -> Vec<usize> {
        self.cpus_where(|cpu| self.slots[cpu] == Slot::Online)
    }

    /// How many domains (buffers) `level` has. Always at least 1; for [`Level::Cpu`] it is
    /// [`Topology::cpu_slots`].
    pub fn domains(&self, level: Level) -> usize {
        self.domain_counts[level.index()]
    }

    /// The dense domain index (`0..domains(level)`) of `cpu` at `level`: one table load.
    ///
    /// `domain_of(cpu, Level::Cpu)` is `cpu`. A `cpu` at or beyond [`Topology::cpu_slots`]
    /// (which a correct CPU id source never gives) is taken modulo the slots, so this never
    /// panics.
    #[inline]
    pub fn domain_of(&self, cpu: usize, level: Level) -> usize {
        let slot = if cpu < self.domains_by_cpu.len() {
            cpu
        } else {
            cpu % self.domains_by_cpu.len()
        };
        self.domains_by_cpu[slot][level.index()] as usize
    }

    /// The CPUs (online or not) in `domain` of `level`, ascending. Empty for a domain index
    /// out of range, and for the [`Level::Cpu`] domain of an id no CPU has (a gap).
    pub fn cpus_in(&self, level: Level, domain: usize) -> Vec<usize> {
        self.cpus_where(|cpu| {
            self.slots[cpu] != Slot::Gap
                && self.domains_by_cpu[cpu][level.index()] as usize == domain
        })
    }

    /// What had to be guessed while reading sysfs; empty for a simulated machine.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A human description: one line per package (with its NUMA node), last-level cache and
    /// core, with their CPUs, as a tree; then the offline CPUs, if any, and the domain count
    /// per level. For `1x2x1`:
    ///
    /// ```text
    /// package 0 (node 0)
    ///   llc 0: cpus 0-1
    ///     core 0: cpus 0
    ///     core 1: cpus 1
    /// domains: cpu 2, core 2, llc 1, package 1, node 1
    /// ```
    ///
    /// All numbers are dense domain indices, as [`Topology::domain_of`] gives them, except
    /// the sysfs cluster id, shown on a core's line when some cluster holds several cores. A
    /// package split into several nodes gets one line per node.
    pub fn describe(&self) -> String {
        self.to_string()
    }

    /// The CPU slots (ids) that satisfy `keep`, ascending.
    fn cpus_where(&self, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        (0..self.slots.len()).filter(|&cpu| keep(cpu)).collect()
    }

    /// The topology when sysfs says nothing about CPUs (a container that masks it): a slot for
    /// every CPU number the kernel can give ([`kernel_cpu_ids`]), each CPU a core of its own,
    /// sharing one LLC, package and node; the CPUs this thread may run on count as online, the
    /// others as offline. Its source is [`TopologySource::Guessed`], so nothing that needs the
    /// real machine (restartable per-CPU buffers) is enabled on it.
    fn fallback(mut warnings: Vec<String>) -> Topology {
        let KernelCpus { ids, allowed } = kernel_cpu_ids();
        warnings.push(format!(
            "no cpu information in sysfs; assumed cpu ids 0-{} (the kernel's cpu mask size), \
             each a core of its own, in one package, last-level cache and node, online where \
             this thread may run ({})",
            ids - 1,
            format_cpu_list(&allowed)
        ));
        let raw = (0..ids)
            .map(|cpu| {
                Some(RawCpu {
                    online: allowed.binary_search(&cpu).is_ok(),
                    facts: CpuFacts {
                        core: CoreKey::Alone(cpu),
                        llc: LlcKey::OfPackage(0),
                        package: 0,
                        node: 0,
                        cluster: None,
                    },
                })
            })
            .collect();
        Topology::assemble(TopologySource::Guessed, raw, warnings)
    }

    /// Numbers the domains of every level densely, in order of first appearance by ascending
    /// CPU id. `raw` has one entry per CPU slot, `None` for a gap.
    fn assemble(source: TopologySource, mut raw: RawCpus, warnings: Vec<String>) -> Topology {
        if raw.is_empty() {
            // Unreachable from the constructors; keeps `domain_of` total regardless.
            raw.push(None);
        }
        let mut cores = DenseIds::default();
        let mut llcs = DenseIds::default();
        let mut packages = DenseIds::default();
        let mut nodes = DenseIds::default();
        let mut domains_by_cpu = Vec::with_capacity(raw.len());
        let mut slots = Vec::with_capacity(raw.len());
        let mut cluster_ids = Vec::with_capacity(raw.len());
        for (cpu, entry) in raw.into_iter().enumerate() {
            // CpuSlots are at most MAX_CPU_ID + 1, so ids fit in u32.
            let cpu_domain = cpu as u32;
            match entry {
                None => {
                    // A gap borrows the domains of the lowest CPU, which are all 0.
                    domains_by_cpu.push([cpu_domain, 0, 0, 0, 0]);
                    slots.push(Slot::Gap);
                    cluster_ids.push(None);
                }
                Some(RawCpu { online, facts }) => {
                    domains_by_cpu.push([
                        cpu_domain,
                        cores.id(facts.core),
                        llcs.id(facts.llc),
                        packages.id(facts.package),
                        nodes.id(facts.node),
                    ]);
                    slots.push(if online { Slot::Online } else { Slot::Offline });
                    cluster_ids.push(facts.cluster);
                }
            }
        }
        let domain_counts = [
            slots.len(),
            cores.count(),
            llcs.count(),
            packages.count(),
            nodes.count(),
        ];
        Topology {
            source,
            domains_by_cpu,
            domain_counts,
            slots,
            cluster_ids,
            warnings,
        }
    }

    /// Whether some cluster (a sysfs cluster id within a package) holds more than one core:
    /// only then is the cluster worth showing.
    fn clusters_group_cores(&self) -> bool {
        let mut core_of_cluster: HashMap<(usize, i64), usize> = HashMap::new();
        self.cpus_where(|cpu| self.slots[cpu] != Slot::Gap)
            .into_iter()
            .any(|cpu| {
                let Some(cluster) = self.cluster_ids[cpu] else {
                    return false;
                };
                let core = self.domain_of(cpu, Level::Core);
                let key = (self.domain_of(cpu, Level::Package), cluster);
                *core_of_cluster.entry(key).or_insert(core) != core
            })
    }
}

impl fmt::Display for Topology {
    /// The same text as [`Topology::describe`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus = self.cpus_where(|cpu| self.slots[cpu] != Slot::Gap);
        let show_clusters = self.clusters_group_cores();
        // Top-level lines are (package, node) pairs: normally one per package, several for a
        // package split into nodes (sub-NUMA clustering).
        let group_of = |cpu| {
            let package = self.domain_of(cpu, Level::Package);
            (package, self.domain_of(cpu, Level::Node))
        };
        let llc_of = |cpu| self.domain_of(cpu, Level::Llc);
        let core_of = |cpu| self.domain_of(cpu, Level::Core);
        for group in first_appearances(&cpus, group_of) {
            let (package, node) = group;
            writeln!(f, "package {package} (node {node})")?;
            let in_group = only(&cpus, group_of, group);
            for llc in first_appearances(&in_group, llc_of) {
                let in_llc = only(&in_group, llc_of, llc);
                writeln!(f, "  llc {llc}: cpus {}", format_cpu_list(&in_llc))?;
                for core in first_appearances(&in_llc, core_of) {
                    let in_core = only(&in_llc, core_of, core);
                    write!(f, "    core {core}")?;
                    if let Some(cluster) = self.cluster_ids[in_core[0]].filter(|_| show_clusters) {
                        write!(f, " (cluster {cluster})")?;
                    }
                    writeln!(f, ": cpus {}", format_cpu_list(&in_core))?;
                }
            }
        }
        let offline = self.cpus_where(|cpu| self.slots[cpu] == Slot::Offline);
        if !offline.is_empty() {
            writeln!(f, "offline: cpus {}", format_cpu_list(&offline))?;
        }
        let counts: Vec<String> = Level::ALL
            .iter()
            .map(|&level| format!("{level} {}", self.domains(level)))
            .collect();
        writeln!(f, "domains: {}", counts.join(", "))
    }
}

/// The distinct values of `key` over `cpus`, in order of first appearance.
fn first_appearances<K: PartialEq>(cpus: &[usize], key: impl Fn(usize) -> K) -> Vec<K> {
    let mut seen = Vec::new();
    for &cpu in cpus {
        let value = key(cpu);
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// The CPUs of `cpus` whose `key` is `value`.
fn only<K: PartialEq>(cpus: &[usize], key: impl Fn(usize) -> K, value: K) -> Vec<usize> {
    cpus.iter()
        .copied()
        .filter(|&cpu| key(cpu) == value)
        .collect()
}

/// Numbers distinct keys `0, 1, 2, ...` in order of first appearance.
struct DenseIds<K> {
    ids: HashMap<K, u32>,
}

impl<K> Default for DenseIds<K> {
    fn default() -> Self {
        DenseIds {
            ids: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> DenseIds<K> {
    /// The dense id of `key`, giving it the next one if it is new.
    fn id(&mut self, key: K) -> u32 {
        // At most one key per CPU slot, so the count fits in u32.
        let next = self.ids.len() as u32;
        *self.ids.entry(key).or_insert(next)
    }

    /// How many distinct keys were seen; at least 1, so every level has a domain.
    fn count(&self) -> usize {
        self.ids.len().max(1)
    }
}

/// Parses a `PxCxT` spec into its three counts.
fn parse_spec(spec: &str) -> Result<[usize; 3], String> {
    const USAGE: &str =
        "expected PxCxT (packages x cores per package x threads per core), e.g. 4x10x2";
    let parts: Vec<&str> = spec.trim().split('x').collect();
    let [packages, cores, threads] = parts[..] else {
        return Err(format!("topology spec {spec:?}: {USAGE}"));
    };
    let mut counts = [0; 3];
    let named = [
        (packages, "packages"),
        (cores, "cores per package"),
        (threads, "threads per core"),
    ];
    for (count, (text, what)) in counts.iter_mut().zip(named) {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "topology spec {spec:?}: {what} {text:?} is not a number; {USAGE}"
            ));
        }
        // All digits, so parsing fails only on overflow; treat that as too many CPUs.
        *count = text.parse().unwrap_or(usize::MAX);
        if *count == 0 {
            return Err(format!(
                "topology spec {spec:?}: {what} is 0; every count must be at least 1"
            ));
        }
    }
    match counts[0]
        .checked_mul(counts[1])
        .and_then(|cpus| cpus.checked_mul(counts[2]))
    {
        Some(cpus) if cpus <= MAX_SIMULATED_CPUS => Ok(counts),
        Some(cpus) => Err(format!(
            "topology spec {spec:?} has {cpus} cpus; at most {MAX_SIMULATED_CPUS} are supported"
        )),
        None => Err(format!(
            "topology spec {spec:?} has more than {MAX_SIMULATED_CPUS} cpus"
        )),
    }
}

#[cfg(test)]
mod tests;
