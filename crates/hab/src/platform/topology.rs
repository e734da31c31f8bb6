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

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::hash::Hash;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::thread;

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
    pub const fn name(self) -> &'static str {
        match self {
            Level::Cpu => "cpu",
            Level::Core => "core",
            Level::Llc => "llc",
            Level::Package => "package",
            Level::Node => "node",
        }
    }

    /// Position in [`Level::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

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
                format!("{text:?} is not a level; expected cpu, core, llc, package or node")
            })
    }
}

/// The most CPUs a simulated machine may have.
const MAX_SIMULATED_CPUS: usize = 4096;

/// The largest CPU id accepted from sysfs. It bounds the per-CPU tables that a corrupt file
/// could otherwise make huge; Linux's `NR_CPUS` is at most 8192.
const MAX_CPU_ID: usize = 65_535;

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
        let mut reader = SysfsReader::new(root);
        let Some(possible) = reader.possible_cpus() else {
            return Topology::fallback(reader.warnings);
        };
        let online = reader.online_cpus(&possible);
        let mut cpus = possible.clone();
        cpus.extend_from_slice(&online);
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.len() > possible.len() {
            let extra: Vec<usize> = online
                .iter()
                .copied()
                .filter(|cpu| possible.binary_search(cpu).is_err())
                .collect();
            reader.warn(format!(
                "cpus {} are online but not possible; counted as possible",
                format_cpu_list(&extra)
            ));
        }
        let nodes = reader.nodes_by_cpu();
        let read: Vec<(usize, SysfsCpu)> = cpus
            .iter()
            .map(|&cpu| (cpu, reader.read_cpu(cpu, &nodes)))
            .collect();
        let raw = guess_missing(&read, &online, &mut reader.warnings);
        Topology::assemble(TopologySource::Sysfs, raw, reader.warnings)
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
    fn assemble(
        source: TopologySource,
        mut raw: Vec<Option<RawCpu>>,
        warnings: Vec<String>,
    ) -> Topology {
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
            // Slots are at most MAX_CPU_ID + 1, so ids fit in u32.
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

/// Which core a CPU belongs to, before dense numbering.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum CoreKey {
    /// Known from sysfs. `core_id` repeats across packages (and may across dies and clusters),
    /// so it is qualified by all three; SMT siblings always share them.
    Ids {
        package: i64,
        die: i64,
        cluster: i64,
        core: i64,
    },
    /// Unknown: the CPU is taken to be a core of its own.
    Alone(usize),
}

/// Which last-level cache a CPU uses, before dense numbering.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LlcKey {
    /// Known from sysfs: the CPUs sharing it (its `shared_cpu_list`).
    Shared(Vec<usize>),
    /// Unknown, or simulated: one per package.
    OfPackage(i64),
}

/// Everything a CPU's domains are derived from.
#[derive(Clone, Debug)]
struct CpuFacts {
    core: CoreKey,
    llc: LlcKey,
    /// The package id (sysfs `physical_package_id`, or the simulated package).
    package: i64,
    /// The NUMA node number.
    node: i64,
    /// The sysfs cluster id, if any; shown by `describe()` only.
    cluster: Option<i64>,
}

/// One CPU before dense numbering.
#[derive(Clone, Debug)]
struct RawCpu {
    online: bool,
    facts: CpuFacts,
}

/// What sysfs says about one CPU: `None` where a file is missing or malformed.
#[derive(Clone, Debug, Default)]
struct SysfsCpu {
    package: Option<i64>,
    die: Option<i64>,
    cluster: Option<i64>,
    core: Option<i64>,
    /// The `shared_cpu_list` of the highest-level cache.
    llc: Option<Vec<usize>>,
    node: Option<i64>,
}

/// Fills in what sysfs did not say, one warning per kind of guess (listing the CPUs):
///
/// - no package: the package of the lowest CPU that has one (normally package 0);
/// - no core id or package: a core of its own;
/// - no last-level cache: that of the lowest CPU of its package that has one, else one per
///   package;
/// - no node: the node of the lowest CPU that has one (normally node 0).
///
/// `read` is ascending by CPU id; the result has one entry per slot, `None` for gaps.
fn guess_missing(
    read: &[(usize, SysfsCpu)],
    online: &[usize],
    warnings: &mut Vec<String>,
) -> Vec<Option<RawCpu>> {
    let default_package = read.iter().find_map(|(_, cpu)| cpu.package).unwrap_or(0);
    let default_node = read.iter().find_map(|(_, cpu)| cpu.node).unwrap_or(0);
    let mut llc_of_package: HashMap<i64, Vec<usize>> = HashMap::new();
    for (_, cpu) in read {
        if let (Some(package), Some(llc)) = (cpu.package, &cpu.llc) {
            llc_of_package.entry(package).or_insert_with(|| llc.clone());
        }
    }

    let slots = read.last().map_or(0, |(cpu, _)| cpu + 1);
    let mut raw: Vec<Option<RawCpu>> = vec![None; slots];
    let (mut no_package, mut no_core, mut no_llc, mut no_node) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (cpu, facts) in read {
        let cpu = *cpu;
        let package = facts.package.unwrap_or_else(|| {
            no_package.push(cpu);
            default_package
        });
        let core = match (facts.package, facts.core) {
            (Some(package), Some(core)) => CoreKey::Ids {
                package,
                die: facts.die.unwrap_or(0),
                cluster: facts.cluster.unwrap_or(-1),
                core,
            },
            _ => {
                no_core.push(cpu);
                CoreKey::Alone(cpu)
            }
        };
        let llc = match (&facts.llc, llc_of_package.get(&package)) {
            (Some(llc), _) => LlcKey::Shared(llc.clone()),
            (None, Some(llc)) => {
                no_llc.push(cpu);
                LlcKey::Shared(llc.clone())
            }
            (None, None) => {
                no_llc.push(cpu);
                LlcKey::OfPackage(package)
            }
        };
        let node = facts.node.unwrap_or_else(|| {
            no_node.push(cpu);
            default_node
        });
        raw[cpu] = Some(RawCpu {
            online: online.binary_search(&cpu).is_ok(),
            facts: CpuFacts {
                core,
                llc,
                package,
                node,
                cluster: facts.cluster,
            },
        });
    }

    let mut guessed = |cpus: &[usize], what: String| {
        if !cpus.is_empty() {
            warnings.push(format!("cpus {}: {what}", format_cpu_list(cpus)));
        }
    };
    guessed(
        &no_package,
        format!("no topology/physical_package_id; guessed package {default_package}"),
    );
    guessed(
        &no_core,
        "no topology/core_id or physical_package_id; guessed a core of its own each".into(),
    );
    guessed(
        &no_llc,
        "no cache/index*/shared_cpu_list; guessed the last-level cache of their package".into(),
    );
    guessed(
        &no_node,
        format!("no NUMA node (node/node*/cpulist or cpuN/nodeM); guessed node {default_node}"),
    );
    raw
}

/// Reads one sysfs tree, collecting a warning for each problem.
struct SysfsReader {
    /// `<root>/devices/system/cpu`.
    cpu_dir: PathBuf,
    /// `<root>/devices/system/node`.
    node_dir: PathBuf,
    warnings: Vec<String>,
}

impl SysfsReader {
    fn new(root: &Path) -> SysfsReader {
        SysfsReader {
            cpu_dir: root.join("devices/system/cpu"),
            node_dir: root.join("devices/system/node"),
            warnings: Vec::new(),
        }
    }

    fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// The possible CPUs, from `cpu/possible`, else from the `cpuN` directories; `None` when
    /// neither says anything.
    fn possible_cpus(&mut self) -> Option<Vec<usize>> {
        let file = self.cpu_dir.join("possible");
        match self.read_cpu_list(&file) {
            Some(cpus) if !cpus.is_empty() => return Some(cpus),
            Some(_) => self.warn(format!("{} is empty", file.display())),
            None => {}
        }
        let cpus = self.cpu_dir_ids();
        if cpus.is_empty() {
            return None;
        }
        self.warn(format!(
            "no usable {}; took the possible cpus from the cpuN directories: {}",
            file.display(),
            format_cpu_list(&cpus)
        ));
        Some(cpus)
    }

    /// The online CPUs, from `cpu/online`, else every possible CPU whose `cpuN/online` does
    /// not say 0.
    fn online_cpus(&mut self, possible: &[usize]) -> Vec<usize> {
        let file = self.cpu_dir.join("online");
        match self.read_cpu_list(&file) {
            Some(cpus) if !cpus.is_empty() => return cpus,
            Some(_) => self.warn(format!("{} is empty", file.display())),
            None => {}
        }
        let online: Vec<usize> = possible
            .iter()
            .copied()
            .filter(|cpu| {
                read_text(&self.cpu_dir.join(format!("cpu{cpu}/online"))).as_deref() != Some("0")
            })
            .collect();
        self.warn(format!(
            "no usable {}; assumed online every possible cpu not marked offline in cpuN/online: {}",
            file.display(),
            format_cpu_list(&online)
        ));
        online
    }

    /// The ids of the `cpuN` directories, ascending.
    fn cpu_dir_ids(&mut self) -> Vec<usize> {
        let mut cpus = Vec::new();
        for (cpu, _) in numbered_entries(&self.cpu_dir, "cpu") {
            if cpu <= MAX_CPU_ID {
                cpus.push(cpu);
            } else {
                self.warn(format!(
                    "ignored cpu{cpu}: ids above {MAX_CPU_ID} are not supported"
                ));
            }
        }
        cpus
    }

    /// The NUMA node of each CPU listed in `node/nodeM/cpulist`; the lowest node wins if a
    /// CPU is listed twice.
    fn nodes_by_cpu(&mut self) -> HashMap<usize, i64> {
        let mut nodes = HashMap::new();
        for (node, path) in numbered_entries(&self.node_dir, "node") {
            let Some(cpus) = self.read_cpu_list(&path.join("cpulist")) else {
                continue;
            };
            for cpu in cpus {
                // Node numbers come from directory names of at most a few digits.
                nodes.entry(cpu).or_insert(node as i64);
            }
        }
        nodes
    }

    /// What sysfs says about `cpu`.
    fn read_cpu(&mut self, cpu: usize, nodes: &HashMap<usize, i64>) -> SysfsCpu {
        let dir = self.cpu_dir.join(format!("cpu{cpu}"));
        let topology = dir.join("topology");
        SysfsCpu {
            package: self.read_id(&topology.join("physical_package_id")),
            die: self.read_id(&topology.join("die_id")),
            cluster: self.read_id(&topology.join("cluster_id")),
            core: self.read_id(&topology.join("core_id")),
            llc: self.last_level_cache(&dir.join("cache")),
            // `cpuN/nodeM` is a symbolic link to the node's directory.
            node: nodes.get(&cpu).copied().or_else(|| {
                numbered_entries(&dir, "node")
                    .first()
                    .map(|&(node, _)| node as i64)
            }),
        }
    }

    /// The CPUs sharing the cache of highest `level` among `cache_dir/index*` (preferring a
    /// data or unified cache to an instruction cache at the same level).
    fn last_level_cache(&mut self, cache_dir: &Path) -> Option<Vec<usize>> {
        let mut best: Option<((u32, bool), PathBuf)> = None;
        for (_, index_dir) in numbered_entries(cache_dir, "index") {
            let Some(level) = read_text(&index_dir.join("level")).and_then(|t| t.parse().ok())
            else {
                continue;
            };
            let holds_data = read_text(&index_dir.join("type")).as_deref() != Some("Instruction");
            // Entries are ascending by index, so `>` keeps the lowest index among equals.
            if best
                .as_ref()
                .is_none_or(|(rank, _)| (level, holds_data) > *rank)
            {
                best = Some(((level, holds_data), index_dir));
            }
        }
        let (_, index_dir) = best?;
        let file = index_dir.join("shared_cpu_list");
        let cpus = self.read_cpu_list(&file)?;
        if cpus.is_empty() {
            self.warn(format!("{} is empty", file.display()));
            return None;
        }
        Some(cpus)
    }

    /// A numeric id file; `None` (with a warning if it exists but is malformed) otherwise.
    /// Ids are signed: sysfs shows -1 for "unknown".
    fn read_id(&mut self, file: &Path) -> Option<i64> {
        let text = read_text(file)?;
        match text.parse() {
            Ok(id) => Some(id),
            Err(_) => {
                self.warn(format!("{}: {text:?} is not a number", file.display()));
                None
            }
        }
    }

    /// A cpu list file; `None` (with a warning if it exists but is malformed) otherwise.
    fn read_cpu_list(&mut self, file: &Path) -> Option<Vec<usize>> {
        let text = read_text(file)?;
        match parse_cpu_list(&text) {
            Ok(cpus) => Some(cpus),
            Err(problem) => {
                self.warn(format!(
                    "{}: bad cpu list {text:?}: {problem}",
                    file.display()
                ));
                None
            }
        }
    }
}

/// The trimmed contents of a text file, or `None` if it cannot be read.
fn read_text(file: &Path) -> Option<String> {
    fs::read_to_string(file)
        .ok()
        .map(|text| text.trim().to_string())
}

/// The entries of `dir` named `<prefix><number>` (`cpu3`, `node0`, `index2`), ascending by
/// number, with their paths. Empty if `dir` cannot be read.
fn numbered_entries(dir: &Path, prefix: &str) -> Vec<(usize, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut numbered: Vec<(usize, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let digits = name.to_str()?.strip_prefix(prefix)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((digits.parse().ok()?, entry.path()))
        })
        .collect();
    numbered.sort_unstable();
    numbered
}

/// Parses a kernel cpu list such as `0-3,8,10-11` (the format of `possible`, `online`,
/// `shared_cpu_list` and `cpulist`) into ascending, distinct CPU ids. Blank text is an empty
/// list (the kernel writes an empty line for an empty set).
///
/// # Errors
///
/// A message naming the bad item: not a number, a backward range, an id above 65535.
/// What the kernel says about CPU numbers without sysfs.
struct KernelCpus {
    /// One more than the largest CPU number the kernel can give: the bits of its CPU mask, as
    /// `sched_getaffinity` reports them (`nr_cpu_ids` or `NR_CPUS` rounded up to a word).
    ids: usize,
    /// The CPUs the calling thread may run on, ascending.
    allowed: Vec<usize>,
}

/// Asks the kernel for the calling thread's CPU mask: its size bounds every CPU number, and
/// its bits are the CPUs the thread may use. Falls back to
/// [`std::thread::available_parallelism`] CPUs where the call fails (not Linux).
fn kernel_cpu_ids() -> KernelCpus {
    #[cfg(target_os = "linux")]
    {
        // The raw system call returns how many bytes of mask the kernel wrote: its mask size.
        let mut mask = vec![0u64; (MAX_CPU_ID + 1) / 64];
        // SAFETY: `mask` is writable for its whole length in bytes, a multiple of 8.
        let written = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                0,
                mask.len() * 8,
                mask.as_mut_ptr(),
            )
        };
        if written > 0 {
            let ids = (written as usize * 8).min(MAX_CPU_ID + 1);
            let allowed: Vec<usize> = (0..ids)
                .filter(|&cpu| mask[cpu / 64] & (1 << (cpu % 64)) != 0)
                .collect();
            if !allowed.is_empty() {
                return KernelCpus { ids, allowed };
            }
        }
    }
    let cpus = thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(MAX_CPU_ID + 1);
    KernelCpus {
        ids: cpus,
        allowed: (0..cpus).collect(),
    }
}

fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Ok(cpus);
    }
    for item in text.split(',') {
        let item = item.trim();
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (parse_cpu_id(first)?, parse_cpu_id(last)?),
            None => {
                let cpu = parse_cpu_id(item)?;
                (cpu, cpu)
            }
        };
        if first > last {
            return Err(format!("range {item:?} runs backwards"));
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// One CPU id of a cpu list: decimal digits only, at most [`MAX_CPU_ID`].
fn parse_cpu_id(text: &str) -> Result<usize, String> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a cpu id"));
    }
    match text.parse::<usize>() {
        Ok(cpu) if cpu <= MAX_CPU_ID => Ok(cpu),
        _ => Err(format!("cpu id {text} is above {MAX_CPU_ID}")),
    }
}

/// Formats ascending CPU ids as a kernel cpu list: `0-3,8,10-11`.
fn format_cpu_list(cpus: &[usize]) -> String {
    let mut items = Vec::new();
    let mut rest = cpus;
    while let Some(&first) = rest.first() {
        // The run of consecutive ids starting at `first`.
        let run = rest
            .iter()
            .enumerate()
            .take_while(|&(offset, &cpu)| cpu == first + offset)
            .count();
        let last = rest[run - 1];
        items.push(if run == 1 {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        rest = &rest[run..];
    }
    items.join(",")
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake sysfs tree in a fresh temporary directory, removed on drop.
    struct FakeSysfs {
        root: PathBuf,
    }

    impl FakeSysfs {
        fn new(name: &str) -> FakeSysfs {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let unique = NEXT.fetch_add(1, Ordering::Relaxed);
            let root = std::env::temp_dir().join(format!(
                "hab-topology-{name}-{}-{unique}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).unwrap();
            FakeSysfs { root }
        }

        /// Writes `contents` (plus the newline sysfs ends every file with) at `relative`.
        fn write(&self, relative: &str, contents: &str) {
            let path = self.root.join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, format!("{contents}\n")).unwrap();
        }

        fn mkdir(&self, relative: &str) {
            fs::create_dir_all(self.root.join(relative)).unwrap();
        }

        /// A CPU's topology files.
        fn cpu(&self, cpu: usize, package: i64, core: i64, siblings: &str) {
            let dir = format!("devices/system/cpu/cpu{cpu}/topology");
            self.write(&format!("{dir}/physical_package_id"), &package.to_string());
            self.write(&format!("{dir}/core_id"), &core.to_string());
            self.write(&format!("{dir}/die_id"), "0");
            self.write(&format!("{dir}/thread_siblings_list"), siblings);
        }

        /// A CPU's caches: L1d and L1i shared by `siblings`, L2 likewise, L3 by `llc`.
        fn caches(&self, cpu: usize, siblings: &str, llc: &str) {
            let caches = [
                (1, "Data", siblings),
                (1, "Instruction", siblings),
                (2, "Unified", siblings),
                (3, "Unified", llc),
            ];
            for (index, (level, kind, shared)) in caches.into_iter().enumerate() {
                let dir = format!("devices/system/cpu/cpu{cpu}/cache/index{index}");
                self.write(&format!("{dir}/level"), &level.to_string());
                self.write(&format!("{dir}/type"), kind);
                self.write(&format!("{dir}/shared_cpu_list"), shared);
            }
        }

        fn discover(&self) -> Topology {
            Topology::discover_from(&self.root)
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    /// Every invariant the allocator relies on, for any topology.
    fn assert_consistent(topology: &Topology) {
        assert!(topology.cpu_slots() >= 1);
        assert!(!topology.online_cpus().is_empty());
        assert_eq!(topology.domains(Level::Cpu), topology.cpu_slots());
        for level in Level::ALL {
            assert!(topology.domains(level) >= 1);
            let mut covered = 0;
            for domain in 0..topology.domains(level) {
                let cpus = topology.cpus_in(level, domain);
                assert!(
                    level == Level::Cpu || !cpus.is_empty(),
                    "{level} {domain} empty"
                );
                for &cpu in &cpus {
                    assert_eq!(topology.domain_of(cpu, level), domain);
                }
                covered += cpus.len();
            }
            let cpus = topology.cpus_where(|cpu| topology.slots[cpu] != Slot::Gap);
            assert_eq!(
                covered,
                cpus.len(),
                "{level}: every cpu in exactly one domain"
            );
            for slot in 0..topology.cpu_slots() + 3 {
                assert!(topology.domain_of(slot, level) < topology.domains(level));
            }
        }
        assert_eq!(topology.describe(), topology.to_string());
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("5\n").unwrap(), [5]);
        assert_eq!(parse_cpu_list(" 2-3 , 0 ").unwrap(), [0, 2, 3]);
        assert_eq!(parse_cpu_list("1,0-2,1").unwrap(), [0, 1, 2]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("65535").unwrap(), [65_535]);
    }

    #[test]
    fn malformed_cpu_lists_say_why() {
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("a").unwrap_err().contains("not a cpu id"));
        assert!(parse_cpu_list("0,,1").unwrap_err().contains("not a cpu id"));
        for bad in ["1-", "-1", "0-1-2", "+1", "0x3", "1.5", "0-3:2/4", "ff"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert!(parse_cpu_list("65536").unwrap_err().contains("above"));
        assert!(parse_cpu_list("0-4000000000")
            .unwrap_err()
            .contains("above"));
        assert!(parse_cpu_list("99999999999999999999999").is_err());
    }

    #[test]
    fn cpu_lists_format_as_the_kernel_does() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[0]), "0");
        assert_eq!(format_cpu_list(&[0, 2, 4]), "0,2,4");
        assert_eq!(format_cpu_list(&[]), "");
        let cpus = parse_cpu_list("0-1,4,6-9").unwrap();
        assert_eq!(format_cpu_list(&cpus), "0-1,4,6-9");
    }

    #[test]
    fn simulated_four_packages_of_ten_smt_cores() {
        let topology = Topology::simulated("4x10x2").unwrap();
        assert_eq!(topology.source(), TopologySource::Simulated);
        assert_eq!(topology.cpu_slots(), 80);
        assert_eq!(topology.online_cpus(), (0..80).collect::<Vec<_>>());
        let counts = Level::ALL.map(|level| topology.domains(level));
        assert_eq!(counts, [80, 40, 4, 4, 4]);
        // cpu = (p*10 + c)*2 + t
        assert_eq!(topology.domain_of(0, Level::Core), 0);
        assert_eq!(topology.domain_of(1, Level::Core), 0);
        assert_eq!(topology.domain_of(2, Level::Core), 1);
        assert_eq!(topology.domain_of(19, Level::Package), 0);
        assert_eq!(topology.domain_of(20, Level::Package), 1);
        assert_eq!(topology.domain_of(45, Level::Core), 22);
        assert_eq!(topology.domain_of(45, Level::Llc), 2);
        assert_eq!(topology.domain_of(45, Level::Node), 2);
        assert_eq!(topology.domain_of(79, Level::Cpu), 79);
        assert_eq!(topology.domain_of(79, Level::Package), 3);
        assert_eq!(topology.cpus_in(Level::Core, 22), [44, 45]);
        assert_eq!(
            topology.cpus_in(Level::Node, 1),
            (20..40).collect::<Vec<_>>()
        );
        assert_eq!(topology.cpus_in(Level::Cpu, 7), [7]);
        assert_eq!(topology.cpus_in(Level::Package, 4), Vec::<usize>::new());
        assert!(topology.warnings().is_empty());
        assert!(topology
            .describe()
            .contains("package 3 (node 3)\n  llc 3: cpus 60-79\n"));
        assert!(topology.describe().contains("    core 39: cpus 78-79\n"));
        assert_consistent(&topology);
    }

    #[test]
    fn simulated_two_single_thread_cores() {
        let topology = Topology::simulated("1x2x1").unwrap();
        assert_eq!(
            Level::ALL.map(|level| topology.domains(level)),
            [2, 2, 1, 1, 1]
        );
        assert_eq!(topology.domain_of(1, Level::Core), 1);
        assert_eq!(topology.cpus_in(Level::Llc, 0), [0, 1]);
        assert_eq!(
            topology.describe(),
            "package 0 (node 0)\n  llc 0: cpus 0-1\n    core 0: cpus 0\n    core 1: cpus 1\n\
             domains: cpu 2, core 2, llc 1, package 1, node 1\n"
        );
        // A CPU id beyond the slots wraps around instead of panicking.
        assert_eq!(topology.domain_of(5, Level::Cpu), 1);
        assert_eq!(topology.domain_of(5, Level::Core), 1);
        assert_consistent(&topology);
    }

    #[test]
    fn bad_specs_name_the_problem() {
        let error = |spec| Topology::simulated(spec).unwrap_err();
        assert!(error("").contains("expected PxCxT"));
        assert!(error("4x10").contains("expected PxCxT"));
        assert!(error("4x10x2x1").contains("expected PxCxT"));
        assert!(error("0x1x1").contains("packages is 0"));
        assert!(error("1x1x0").contains("threads per core is 0"));
        assert!(error("ax2x1").contains("packages \"a\" is not a number"));
        assert!(error("1x-2x1").contains("not a number"));
        assert!(error("100x100x100").contains("1000000 cpus"));
        assert!(error("99999999999999999999x2x2").contains("more than 4096"));
        assert!(error("4096x4096x4096").contains("4096"));
        assert!(Topology::simulated("4096x1x1").is_ok());
        assert!(Topology::simulated("4097x1x1").is_err());
    }

    /// Two packages of two cores of two threads, numbered as Linux does: the first threads of
    /// every core (0-3), then their siblings (4-7). Core ids are 0 and 4 in both packages.
    #[test]
    fn discovers_a_two_package_smt_machine() {
        let sysfs = FakeSysfs::new("smt");
        sysfs.write("devices/system/cpu/possible", "0-7");
        sysfs.write("devices/system/cpu/online", "0-7");
        sysfs.mkdir("devices/system/cpu/cpufreq");
        for cpu in 0..8 {
            let package = (cpu % 4 / 2) as i64;
            let core = (cpu % 2 * 4) as i64;
            let siblings = format!("{},{}", cpu % 4, cpu % 4 + 4);
            let llc = if package == 0 { "0-1,4-5" } else { "2-3,6-7" };
            sysfs.cpu(cpu, package, core, &siblings);
            sysfs.caches(cpu, &siblings, llc);
        }
        sysfs.write("devices/system/node/node0/cpulist", "0-1,4-5");
        sysfs.write("devices/system/node/node1/cpulist", "2-3,6-7");
        sysfs.write("devices/system/node/online", "0-1");

        let topology = sysfs.discover();
        assert_eq!(topology.warnings(), &[] as &[String]);
        assert_eq!(topology.source(), TopologySource::Sysfs);
        assert_eq!(topology.cpu_slots(), 8);
        assert_eq!(
            Level::ALL.map(|level| topology.domains(level)),
            [8, 4, 2, 2, 2]
        );
        assert_eq!(
            topology.domain_of(4, Level::Core),
            topology.domain_of(0, Level::Core)
        );
        assert_eq!(topology.domain_of(2, Level::Core), 2);
        assert_eq!(topology.cpus_in(Level::Core, 2), [2, 6]);
        assert_eq!(topology.cpus_in(Level::Llc, 1), [2, 3, 6, 7]);
        assert_eq!(topology.cpus_in(Level::Package, 0), [0, 1, 4, 5]);
        assert_eq!(topology.cpus_in(Level::Node, 1), [2, 3, 6, 7]);
        let text = topology.describe();
        assert!(
            text.contains("package 1 (node 1)\n  llc 1: cpus 2-3,6-7\n"),
            "{text}"
        );
        assert!(text.contains("    core 2: cpus 2,6\n"), "{text}");
        assert!(text.ends_with("domains: cpu 8, core 4, llc 2, package 2, node 2\n"));
        assert_consistent(&topology);
    }

    /// Ids 0-1 and 4-6 (2 and 3 do not exist); cpu 6 is offline and, as on x86, has no
    /// topology or cache directory left, only its node link.
    #[test]
    fn discovers_gaps_and_an_offline_cpu() {
        let sysfs = FakeSysfs::new("gaps");
        sysfs.write("devices/system/cpu/possible", "0-1,4-6");
        sysfs.write("devices/system/cpu/online", "0-1,4-5");
        sysfs.write("devices/system/cpu/offline", "2-3,6");
        for (core, cpu) in [0, 1, 4, 5].into_iter().enumerate() {
            sysfs.cpu(cpu, 0, core as i64, &cpu.to_string());
            sysfs.caches(cpu, &cpu.to_string(), "0-1,4-5");
        }
        sysfs.write("devices/system/cpu/cpu6/online", "0");
        sysfs.mkdir("devices/system/cpu/cpu6/node0");
        sysfs.write("devices/system/node/node0/cpulist", "0-1,4-5");

        let topology = sysfs.discover();
        assert_eq!(topology.cpu_slots(), 7);
        assert_eq!(topology.online_cpus(), [0, 1, 4, 5]);
        assert_eq!(
            Level::ALL.map(|level| topology.domains(level)),
            [7, 5, 1, 1, 1]
        );
        // The offline cpu has a core of its own, in the package's LLC.
        assert_eq!(topology.domain_of(6, Level::Core), 4);
        assert_eq!(topology.cpus_in(Level::Core, 4), [6]);
        assert_eq!(topology.cpus_in(Level::Llc, 0), [0, 1, 4, 5, 6]);
        // Gaps share the lowest cpu's domains and are in no domain.
        assert_eq!(topology.domain_of(2, Level::Core), 0);
        assert_eq!(topology.domain_of(3, Level::Cpu), 3);
        assert_eq!(topology.cpus_in(Level::Cpu, 2), Vec::<usize>::new());
        let warnings = topology.warnings().join("\n");
        assert!(
            warnings.contains("cpus 6: no topology/physical_package_id"),
            "{warnings}"
        );
        assert!(
            warnings.contains("cpus 6: no topology/core_id"),
            "{warnings}"
        );
        assert!(warnings.contains("cpus 6: no cache"), "{warnings}");
        assert!(!warnings.contains("NUMA"), "node link used: {warnings}");
        assert!(topology.describe().contains("offline: cpus 6\n"));
        assert_consistent(&topology);
    }

    /// Two packages of one SMT core each, with neither cache nor NUMA information.
    #[test]
    fn discovers_a_machine_without_caches_or_nodes() {
        let sysfs = FakeSysfs::new("bare");
        sysfs.write("devices/system/cpu/possible", "0-3");
        sysfs.write("devices/system/cpu/online", "0-3");
        for cpu in 0..4 {
            sysfs.cpu(cpu, (cpu / 2) as i64, 0, "");
        }

        let topology = sysfs.discover();
        assert_eq!(
            Level::ALL.map(|level| topology.domains(level)),
            [4, 2, 2, 2, 1]
        );
        assert_eq!(topology.cpus_in(Level::Llc, 1), [2, 3]);
        assert_eq!(topology.cpus_in(Level::Node, 0), [0, 1, 2, 3]);
        let warnings = topology.warnings().join("\n");
        assert!(warnings.contains("cpus 0-3: no cache"), "{warnings}");
        assert!(warnings.contains("cpus 0-3: no NUMA node"), "{warnings}");
        assert!(topology.describe().contains("package 1 (node 0)\n"));
        assert_consistent(&topology);
    }

    /// Without sysfs the topology is a guess that says so, with a slot for every CPU number
    /// the kernel can give, not only for the CPUs this thread may use (which shrink under
    /// `taskset` and cgroups while the kernel still numbers CPUs up to its mask size).
    #[test]
    fn an_empty_root_is_guessed_from_the_kernels_cpu_mask() {
        let sysfs = FakeSysfs::new("empty");
        let topology = sysfs.discover();
        let kernel = kernel_cpu_ids();
        assert_eq!(topology.source(), TopologySource::Guessed);
        assert_eq!(topology.cpu_slots(), kernel.ids);
        assert_eq!(topology.online_cpus(), kernel.allowed);
        assert_eq!(topology.domains(Level::Core), kernel.ids);
        assert_eq!(topology.domains(Level::Package), 1);
        assert!(topology.warnings()[0].contains("no cpu information"));
        assert_consistent(&topology);
        // Every CPU this process could be moved to, and the largest it may use now, has a slot.
        let possible = Topology::discover();
        if possible.source() == TopologySource::Sysfs {
            assert!(topology.cpu_slots() >= possible.cpu_slots());
        }
        assert!(kernel.allowed.iter().all(|&cpu| cpu < topology.cpu_slots()));

        let missing = Topology::discover_from(Path::new("/nonexistent/hab/sysfs"));
        assert_eq!(missing.cpu_slots(), kernel.ids);
        assert_eq!(missing.source(), TopologySource::Guessed);
        assert!(!missing.warnings().is_empty());
    }

    #[test]
    fn malformed_files_fall_back_with_warnings() {
        let sysfs = FakeSysfs::new("malformed");
        sysfs.write("devices/system/cpu/possible", "0-x");
        sysfs.write("devices/system/cpu/online", "");
        sysfs.write("devices/system/cpu/cpu1/online", "0");
        sysfs.cpu(0, 0, 0, "0");
        sysfs.write(
            "devices/system/cpu/cpu1/topology/physical_package_id",
            "zero",
        );
        sysfs.write("devices/system/cpu/cpu1/topology/core_id", "1");
        sysfs.caches(0, "0", "0-1");
        sysfs.write("devices/system/cpu/cpu1/cache/index0/level", "1");
        sysfs.write(
            "devices/system/cpu/cpu1/cache/index0/shared_cpu_list",
            "1-0",
        );
        sysfs.write("devices/system/node/node0/cpulist", "garbage");

        let topology = sysfs.discover();
        assert_eq!(topology.cpu_slots(), 2);
        assert_eq!(topology.online_cpus(), [0]);
        assert_eq!(
            Level::ALL.map(|level| topology.domains(level)),
            [2, 2, 1, 1, 1]
        );
        let warnings = topology.warnings().join("\n");
        for expected in [
            "bad cpu list \"0-x\"",
            "cpuN directories",
            "online is empty",
            "\"zero\" is not a number",
            "runs backwards",
            "bad cpu list \"garbage\"",
            "cpus 1: no topology/physical_package_id; guessed package 0",
        ] {
            assert!(warnings.contains(expected), "{expected:?} in {warnings}");
        }
        assert_consistent(&topology);
    }

    #[test]
    fn clusters_show_when_they_group_cores() {
        let sysfs = FakeSysfs::new("clusters");
        sysfs.write("devices/system/cpu/possible", "0-3");
        sysfs.write("devices/system/cpu/online", "0-3");
        for cpu in 0..4 {
            sysfs.cpu(cpu, 0, cpu as i64, &cpu.to_string());
            let cluster = (cpu / 2).to_string();
            sysfs.write(
                &format!("devices/system/cpu/cpu{cpu}/topology/cluster_id"),
                &cluster,
            );
            sysfs.caches(cpu, &cpu.to_string(), "0-3");
        }
        sysfs.mkdir("devices/system/node/node0");
        sysfs.write("devices/system/node/node0/cpulist", "0-3");
        let topology = sysfs.discover();
        assert!(topology.warnings().is_empty(), "{:?}", topology.warnings());
        assert!(topology
            .describe()
            .contains("    core 3 (cluster 1): cpus 3\n"));
        assert_consistent(&topology);
    }

    #[test]
    fn discovers_this_machine() {
        let topology = Topology::discover();
        println!("{topology}");
        for warning in topology.warnings() {
            println!("warning: {warning}");
        }
        assert!(topology.cpu_slots() >= 1);
        for cpu in topology.online_cpus() {
            for level in Level::ALL {
                let domain = topology.domain_of(cpu, level);
                assert!(domain < topology.domains(level));
                assert!(topology.cpus_in(level, domain).contains(&cpu));
            }
        }
        assert_consistent(&topology);
    }
}
