//! What the machine says of each CPU before the topology numbers its domains densely: the
//! keys of its core and last-level cache, its package and node (from sysfs, or simulated).

/// The largest CPU id accepted from sysfs. It bounds the per-CPU tables that a corrupt file
/// could otherwise make huge; Linux's `NR_CPUS` is at most 8192.
pub(super) const MAX_CPU_ID: usize = 65_535;

/// Which core a CPU belongs to, before dense numbering.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum CoreKey {
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
pub(super) enum LlcKey {
    /// Known from sysfs: the CPUs sharing it (its `shared_cpu_list`).
    Shared(Vec<usize>),
    /// Unknown, or simulated: one per package.
    OfPackage(i64),
}

/// Everything a CPU's domains are derived from.
#[derive(Clone, Debug)]
pub(super) struct CpuFacts {
    pub(super) core: CoreKey,
    pub(super) llc: LlcKey,
    /// The package id (sysfs `physical_package_id`, or the simulated package).
    pub(super) package: i64,
    /// The NUMA node number.
    pub(super) node: i64,
    /// The sysfs cluster id, if any; shown by `describe()` only.
    pub(super) cluster: Option<i64>,
}

/// One entry per CPU slot before dense numbering, `None` for a gap in the ids.
pub(super) type RawCpus = Vec<Option<RawCpu>>;

/// One CPU before dense numbering.
#[derive(Clone, Debug)]
pub(super) struct RawCpu {
    pub(super) online: bool,
    pub(super) facts: CpuFacts,
}
