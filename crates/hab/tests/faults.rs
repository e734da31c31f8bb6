//! Fault injection at the heap's level: CPU numbers beyond the topology's per-CPU arrays,
//! collections that panic or cannot stop the world, forks while threads allocate, and heap
//! exhaustion with many threads in every mode. (Aborts at every instruction boundary of the
//! restartable sections are injected by the unit tests of `rseq.rs`.)

mod common;

use std::path::PathBuf;

use common::{assert_disjoint_inside, walk_objects, write_header};
use hab::{HeaderWordModel, Heap, HeapConfig, Level, Mode, TlabPolicy, TopologySource};

/// A sysfs tree that knows only CPU 0, as a container or a captured topology may show.
fn one_cpu_sysfs(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hab-faults-{name}-{}", std::process::id()));
    let cpu = root.join("devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu0/topology")).unwrap();
    std::fs::write(cpu.join("possible"), "0\n").unwrap();
    std::fs::write(cpu.join("online"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/physical_package_id"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/core_id"), "0\n").unwrap();
    std::fs::write(cpu.join("cpu0/topology/thread_siblings_list"), "0\n").unwrap();
    root
}

/// The highest CPU other than 0 this thread may run on, if any.
fn a_cpu_beyond_zero() -> Option<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the kernel.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    };
    // SAFETY: reads bits inside the set.
    (1..libc::CPU_SETSIZE as usize)
        .rev()
        .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// A heap whose topology (read from a sysfs tree) has one CPU, on a thread that runs on
/// another: in the `plab` mode and with a restartable `cpu` level, every section sees a CPU
/// beyond its array, takes the compare-and-swap path and counts it; nothing overlaps and the
/// walk is exact. This is the container reproduction (`/sys/devices/system/cpu` masked, the
/// process on CPU 1) without needing the mount.
#[test]
fn cpus_beyond_the_topology_take_the_compare_and_swap_path() {
    let Some(cpu) = a_cpu_beyond_zero() else {
        eprintln!(
            "skipped: this process may only run on cpu 0, so no cpu is beyond a 1-cpu topology"
        );
        return;
    };
    let root = one_cpu_sysfs("beyond");
    for (mode, middle) in [(Mode::Plab, None), (Mode::Hab, Some("cpu:64KiB"))] {
        let mut builder = HeapConfig::builder()
            .capacity("64MiB")
            .mode(mode)
            .tlab(TlabPolicy::Fixed(4096))
            .sysfs_topology(&root);
        if let Some(middle) = middle {
            builder = builder.middle(middle);
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        assert_eq!(heap.topology().source(), TopologySource::Sysfs);
        assert_eq!(heap.topology().cpu_slots(), 1);
        let (objects, stats) = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    pin(cpu);
                    let mut mutator = heap.attach();
                    let size = mutator.checked_size(32).unwrap();
                    let mut objects = Vec::new();
                    for _ in 0..20_000 {
                        let object = match mutator.plab() {
                            Some(mut plab) => plab.alloc_sized(size),
                            None => mutator.alloc_sized(size),
                        }
                        .unwrap();
                        write_header(object, 32);
                        objects.push((object.as_ptr() as usize, 32));
                    }
                    let stats = mutator.stats();
                    (objects, stats)
                })
                .join()
                .unwrap()
        });
        let restartable = match mode {
            Mode::Plab => heap.plabs_restartable() == Some(true),
            _ => heap.middle_levels()[0].restartable,
        };
        if restartable {
            let out_of_range = match mode {
                Mode::Plab => stats.plab.out_of_range_cpus,
                _ => stats.levels[Level::Cpu.index()].out_of_range_cpus,
            };
            assert!(
                out_of_range > 0,
                "{mode:?}: out-of-range cpus counted: {stats:?}"
            );
        } else {
            eprintln!("{mode:?}: rseq unavailable here, the sections did not run");
        }
        let mut objects = objects;
        let collection = heap.collection();
        let (summary, mut walked) = walk_objects(&collection);
        assert_eq!(summary.total_bytes(), collection.used_bytes());
        assert_eq!(summary.objects, 20_000);
        walked.sort_unstable();
        objects.sort_unstable();
        assert_eq!(
            walked, objects,
            "{mode:?}: the walk finds exactly the objects"
        );
        assert_disjoint_inside(&mut objects, heap.reserved_range());
        drop(collection);
    }
    std::fs::remove_dir_all(root).ok();
}
