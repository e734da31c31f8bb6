//! A short description of the machine a report was measured on, and what reading its CPU
//! number costs.

use std::ffi::CStr;
use std::fs;
use std::hint::black_box;
use std::time::{Duration, Instant};

use hab::{CpuIdReader, Level, SimulatedCpu, Topology};

/// Lines describing CPU, memory and kernel, read from /proc and sysfs where available.
pub fn describe() -> Vec<String> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split(':').nth(1))
            .map(|value| value.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let flags = field("flags").unwrap_or_default();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let kib: u64 = text
                .lines()
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kib as f64 / (1 << 20) as f64))
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let cache = |index: u32| {
        let base = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let level = fs::read_to_string(format!("{base}/level")).ok()?;
        let size = fs::read_to_string(format!("{base}/size")).ok()?;
        Some(format!("L{} {}", level.trim(), size.trim()))
    };
    let caches: Vec<String> = (0..8).filter_map(cache).collect();
    let hypervisor = if flags.split_whitespace().any(|f| f == "hypervisor") {
        ", virtual machine"
    } else {
        ""
    };
    vec![
        format!("CPU: {model}, {cpus} logical CPUs available{hypervisor}"),
        format!(
            "Caches (per CPU 0): {}",
            if caches.is_empty() {
                "unknown".into()
            } else {
                caches.join(", ")
            }
        ),
        format!("Memory: {memory}; Linux {kernel}; {}", libc_version()),
        topology(),
        format!("Per-CPU support: {}", hab::per_cpu_support()),
    ]
}

/// The machine's shape as Hab reads it from sysfs.
fn topology() -> String {
    let topology = Topology::discover();
    let count = |level| topology.domains(level);
    format!(
        "Topology: {} package(s), {} NUMA node(s), {} last-level cache(s), {} core(s), {} online \
         CPU(s){}",
        count(Level::Package),
        count(Level::Node),
        count(Level::Llc),
        count(Level::Core),
        topology.online_cpus().len(),
        if topology.warnings().is_empty() {
            String::new()
        } else {
            format!(
                " ({} guess(es), see `hab topology`)",
                topology.warnings().len()
            )
        }
    )
}

/// The C library and its version.
fn libc_version() -> String {
    // SAFETY: glibc returns a pointer to a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    format!("glibc {}", version.to_string_lossy())
}

/// Cost of one reading of a CPU-id source, measured in this process: nanoseconds per call of
/// [`CpuIdReader::current`], the best of 3 runs of `calls` calls (at least 1) in a tight loop.
pub fn cpu_id_ns_per_call(reader: &CpuIdReader, calls: u64) -> f64 {
    let calls = calls.max(1);
    let thread = SimulatedCpu::new(reader, 0);
    let reader = black_box(*reader);
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let mut sum = 0usize;
        for _ in 0..calls {
            sum = sum.wrapping_add(reader.current(black_box(&thread)));
        }
        black_box(sum);
        best = best.min(start.elapsed());
    }
    // A clock too coarse to see the loop still yields a positive cost.
    best.max(Duration::from_nanos(1)).as_nanos() as f64 / calls as f64
}

#[cfg(test)]
mod cost_tests {
    use super::*;
    use hab::CpuIdSource;

    #[test]
    fn measures_a_positive_cost() {
        let mut readers: Vec<CpuIdReader> = CpuIdSource::NAMES
            .iter()
            .filter_map(|name| CpuIdReader::new(name.parse().ok()?, 4096).ok())
            .collect();
        readers.push(CpuIdReader::new("sim:0.5:1".parse().unwrap(), 8).unwrap());
        for reader in readers {
            let ns = cpu_id_ns_per_call(&reader, 100_000);
            assert!(ns.is_finite() && ns > 0.0, "{}: {ns}", reader.source());
        }
        let reader = CpuIdReader::new("sim:0:1".parse().unwrap(), 1).unwrap();
        let ns = cpu_id_ns_per_call(&reader, 0);
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }
}
