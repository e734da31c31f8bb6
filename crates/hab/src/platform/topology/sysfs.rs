//! Reading a sysfs tree into per-CPU facts, guessing (with a warning) whatever it does not
//! say, and the kernel's CPU mask for when it says nothing at all.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;

use super::cpu_list::{format_cpu_list, parse_cpu_list};
use super::raw::{CoreKey, CpuFacts, LlcKey, RawCpu, RawCpus, MAX_CPU_ID};

/// Reads the CPUs under `root` (which plays the role of `/sys`): one entry per CPU slot
/// (`None` for a gap) and the warnings for what had to be guessed. `Err` with the warnings
/// when sysfs says nothing about CPUs at all.
pub(super) fn read(root: &Path) -> Result<(RawCpus, Vec<String>), Vec<String>> {
    let mut reader = SysfsReader::new(root);
    let Some(possible) = reader.possible_cpus() else {
        return Err(reader.warnings);
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
    Ok((raw, reader.warnings))
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
) -> RawCpus {
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
pub(super) fn read_text(file: &Path) -> Option<String> {
    fs::read_to_string(file)
        .ok()
        .map(|text| text.trim().to_string())
}

/// The entries of `dir` named `<prefix><number>` (`cpu3`, `node0`, `index2`), ascending by
/// number, with their paths. Empty if `dir` cannot be read.
pub(super) fn numbered_entries(dir: &Path, prefix: &str) -> Vec<(usize, PathBuf)> {
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

/// What the kernel says about CPU numbers without sysfs.
pub(super) struct KernelCpus {
    /// One more than the largest CPU number the kernel can give: the bits of its CPU mask, as
    /// `sched_getaffinity` reports them (`nr_cpu_ids` or `NR_CPUS` rounded up to a word).
    pub(super) ids: usize,
    /// The CPUs the calling thread may run on, ascending.
    pub(super) allowed: Vec<usize>,
}

/// Asks the kernel for the calling thread's CPU mask: its size bounds every CPU number, and
/// its bits are the CPUs the thread may use. Falls back to
/// [`std::thread::available_parallelism`] CPUs where the call fails (not Linux).
pub(super) fn kernel_cpu_ids() -> KernelCpus {
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
