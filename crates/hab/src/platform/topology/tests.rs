//! Topologies from fake sysfs trees, simulated specs and this machine: every invariant the
//! allocator relies on holds, and every guess is named in a warning.

use super::cpu_list::{format_cpu_list, parse_cpu_list};
use super::*;
use std::fs;
use std::path::PathBuf;
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
