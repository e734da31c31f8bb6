//! `hab`: run allocation workloads on Hab and write reports.

mod callgrind;
mod figures;
mod hotspot_command;
mod limits;
mod machine;
mod report;
mod vm_run;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hab::{
    ByteSize, CpuIdReader, CpuIdSource, HeaderWordModel, Heap, HeapConfig, MiddleLevelSpec, Mode,
    SimulatedCpu, TlabPolicy, Topology, TopologySource, ZeroMemory,
};

use hotspot_command::{hotspot_hab, HotspotHabArgs};
use vm_run::{VmRunSpec, VmWorkload};
use workload::{RunSpec, Workload};

#[derive(Parser)]
#[command(
    name = "hab",
    version,
    about = "Hierarchical allocation buffers: workloads and reports"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one workload configuration and print its figures.
    Run(RunArgs),
    /// Run the seeds' experiments and write DIR/README.md with tables.
    Report(ReportArgs),
    /// Print the machine's topology, the buffers each middle level would have, and the CPU-id
    /// source and synchronisation in use.
    Topology(TopologyArgs),
    /// Measure the cost of each CPU-id source (ns per call).
    CpuId(CpuIdArgs),
    /// Run HotSpot with HABs (`jvm/hotspot/build.sh`) against stock HotSpot: the javac grid,
    /// the many-threads chat, the observed JVM or the real applications; print the tables,
    /// write JSON.
    HotspotHab(HotspotHabArgs),
}

#[derive(clap::Args)]
struct TopologyArgs {
    /// Simulate a machine of PACKAGESxCORESxTHREADS (e.g. 4x10x2) instead of this one.
    #[arg(long)]
    topology: Option<String>,
    /// Middle levels to show buffers for.
    #[arg(
        long,
        default_value = "cpu:256KiB,core:1MiB,llc:8MiB,package:32MiB,node:64MiB"
    )]
    middle: String,
    /// CPU-id source (default: rseq where glibc registered it, else getcpu).
    #[arg(long, value_parser = parse_cpu_id)]
    cpu_id: Option<CpuIdSource>,
}

#[derive(clap::Args)]
struct CpuIdArgs {
    /// Only this source, and print nothing: `--calls` readings (for counting instructions
    /// under callgrind).
    #[arg(long, value_parser = parse_cpu_id)]
    source: Option<CpuIdSource>,
    /// Readings per measurement.
    #[arg(long, default_value_t = 10_000_000)]
    calls: u64,
}

/// Every workload `hab run` knows.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum WorkloadArg {
    /// Shipilëv's experiment: allocate N objects per thread and keep them in an array.
    AllocArray,
    /// Jaffer's experiment: allocate and drop; reset the heap when it fills.
    AllocObject,
    /// On the VM: the Benchmarks Game's binary-trees (`--depth`), collected by copying.
    BinaryTrees,
    /// On the VM: Boehm's GCBench (`--depth`: the largest temporary tree, 16 originally).
    Gcbench,
    /// On the VM: SPECjbb-like warehouses (`--threads`, `--objects` orders each,
    /// `--live-orders`); throughput in orders per second.
    Warehouses,
    /// On the VM: VolanoMark-like chat (`--rooms` of 20 threads, `--objects` messages each).
    Chat,
    /// On the VM: javac-like compilation units of many small objects (`--objects` units).
    JavacLike,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The workload.
    #[arg(long, value_enum, default_value = "alloc-array")]
    workload: WorkloadArg,
    /// Allocation mode: shared (CAS per object, like -XX:-UseTLAB), tlab, hab (TLABs refilled
    /// from the middle levels), cpu-lab (objects in per-CPU LABs; `plab`, the seed's name, is
    /// an alias) or flip (tlab or cpu-lab, switched at collections).
    #[arg(long, default_value = "tlab", value_parser = parse_mode)]
    mode: Mode,
    /// TLAB size (e.g. 256KiB, fixed), adaptive (HotSpot) or growing (Agesen).
    #[arg(long, default_value = "adaptive", value_parser = parse_policy)]
    tlab_size: TlabPolicy,
    /// Mutator threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Objects per thread and repetition (VM workloads: orders, messages or units; default
    /// 10 M for alloc-array and alloc-object, the workload's own for the others).
    #[arg(long)]
    objects: Option<usize>,
    /// Object size in bytes (a multiple of 8).
    #[arg(long, default_value_t = 16)]
    object_size: usize,
    /// Heap capacity (default: fits alloc-array without a collection; 16MiB for alloc-object).
    #[arg(long, value_parser = parse_size)]
    heap: Option<usize>,
    /// Measured repetitions.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Repetitions run first and not counted.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Smallest TLAB (MinTLABSize).
    #[arg(long, value_parser = parse_size)]
    min_tlab: Option<usize>,
    /// Largest TLAB (MaxTLABSize).
    #[arg(long, value_parser = parse_size)]
    max_tlab: Option<usize>,
    /// Allowed TLAB waste in percent of the heap (TLABWasteTargetPercent).
    #[arg(long, default_value_t = 1.0)]
    waste_target_percent: f64,
    /// Retire a full TLAB only if its free space is at most 1/N of its size
    /// (TLABRefillWasteFraction).
    #[arg(long, default_value_t = 64)]
    refill_waste_fraction: usize,
    /// Zero reused memory a step ahead of each TLAB's top (`ahead`), a whole TLAB at refill
    /// (`refill`), or never (the workloads then initialise each object: header, then zeroes).
    #[arg(long, default_value = "ahead", value_parser = parse_zero)]
    zero: ZeroMemory,
    /// Allocate with an allocation prefetch: one `prefetchw` of the line 1 KiB beyond each new
    /// object (alloc-array, alloc-object).
    #[arg(long)]
    prefetch: bool,
    /// Sample allocations every this many bytes per thread, with a callback that counts them
    /// (alloc-array, alloc-object).
    #[arg(long, value_parser = parse_positive_bytes)]
    sample_every: Option<usize>,
    /// alloc-object: poll for a safepoint after every object (what a poll costs).
    #[arg(long)]
    poll: bool,
    /// Middle levels of mode hab, lowest first: e.g. core:1MiB or core:512KiB,package:32MiB;
    /// `auto` (the default) picks them from the machine and the heap.
    #[arg(long, default_value = "auto")]
    middle: String,
    /// Where the CPU number comes from: rseq, getcpu, rdpid, or `sim[:probability[:seed]]`
    /// (default: rseq where glibc registered it, else getcpu).
    #[arg(long, value_parser = parse_cpu_id)]
    cpu_id: Option<CpuIdSource>,
    /// Simulate a machine of PACKAGESxCORESxTHREADS (e.g. 4x10x2) instead of this one.
    #[arg(long)]
    topology: Option<String>,
    /// Skip timing the compute loop that normalises multi-thread scaling.
    #[arg(long)]
    no_compute: bool,
    /// Print one JSON object per line instead of a summary.
    #[arg(long)]
    json: bool,
    /// Tree depth (binary-trees, gcbench).
    #[arg(long, default_value_t = 10)]
    depth: u32,
    /// Rooms of 20 connections (chat).
    #[arg(long, default_value_t = 10)]
    rooms: usize,
    /// Orders each warehouse keeps alive (warehouses).
    #[arg(long, default_value_t = 100)]
    live_orders: usize,
    /// Run alloc-array or alloc-object on the VM (objects collected by copying) rather than
    /// on a bare Hab heap (reset when full).
    #[arg(long)]
    vm: bool,
    /// VM workloads: check the heap before and after every collection; stop at the first
    /// problem.
    #[arg(long)]
    verify: bool,
    /// VM workloads: one line per collection on standard error (like -Xlog:gc).
    #[arg(long)]
    log_gc: bool,
    /// VM workloads: each thread's LAB statistics at every collection (like -Xlog:gc+tlab).
    #[arg(long)]
    log_tlab: bool,
    /// VM workloads: TLABs shrink as each cycle's allocation space runs out, to each
    /// thread's part of what is left, then objects are allocated outside TLABs (`tlab` and
    /// `flip` modes); in the `hab` mode the middle levels' buffers shrink to their share of
    /// what is left (default on).
    #[arg(long, value_enum)]
    end_of_cycle: Option<Switch>,
}

/// A setting turned on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Smaller object counts and fewer repetitions: finishes in well under 2 minutes.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The seeds' sizes: longer runs and more repetitions.
    #[arg(long)]
    full: bool,
    /// Run HotSpot beside Hab (bench/jvm; needs java and mvn), also at the quick scale.
    #[arg(long, conflicts_with = "no_jvm")]
    jvm: bool,
    /// Do not run HotSpot, even where Java and Maven are installed.
    #[arg(long)]
    no_jvm: bool,
    /// Where to write README.md.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Simulate a machine of this many CPUs (1 to 256): thread counts follow it, runs see a
    /// simulated topology and CPU ids, and count-based figures (collections, waste, foreign
    /// allocations, instructions) are that machine's; times mean nothing. HotSpot does not run.
    #[arg(long, value_parser = parse_simulated_cpus, conflicts_with = "jvm")]
    cpus: Option<usize>,
}

fn parse_simulated_cpus(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(cpus @ 1..=256) => Ok(cpus),
        _ => Err(format!("{text:?}: expected a number of CPUs from 1 to 256")),
    }
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_policy(text: &str) -> Result<TlabPolicy, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_positive_bytes(text: &str) -> Result<usize, String> {
    let bytes = text
        .parse::<hab::ByteSize>()
        .map_err(|e| e.to_string())?
        .bytes();
    if bytes == 0 {
        return Err("must be at least 1 byte".into());
    }
    Ok(bytes)
}

fn parse_zero(text: &str) -> Result<ZeroMemory, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_cpu_id(text: &str) -> Result<CpuIdSource, String> {
    text.parse()
}

fn parse_size(text: &str) -> Result<usize, String> {
    text.parse::<ByteSize>()
        .map(ByteSize::bytes)
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    // Output piped into a reader that exits early (`hab run | head`) ends the process quietly,
    // as for other command-line tools, instead of a panic on the failed write.
    // SAFETY: restoring the default disposition of SIGPIPE, before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let result = match Cli::parse().command {
        Command::Run(args) => run(args),
        Command::Report(args) => {
            let size = match (args.quick, args.full) {
                (true, _) => report::Size::Quick,
                (_, true) => report::Size::Full,
                _ => report::Size::Default,
            };
            let jvm = match (args.jvm, args.no_jvm) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            report::write(size, jvm, args.cpus, &args.out)
        }
        Command::Topology(args) => topology(args),
        Command::CpuId(args) => cpu_id(args),
        Command::HotspotHab(args) => hotspot_hab(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("hab: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: RunArgs) -> Result<(), String> {
    limits::repetitions("--repeat", args.repeat, false)?;
    limits::repetitions("--warmup", args.warmup, true)?;
    let workload = match args.workload {
        WorkloadArg::AllocArray if args.vm => return run_vm(args, VmWorkload::AllocArray),
        WorkloadArg::AllocObject if args.vm => return run_vm(args, VmWorkload::AllocObject),
        WorkloadArg::AllocArray => Workload::AllocArray,
        WorkloadArg::AllocObject => Workload::AllocObject,
        WorkloadArg::BinaryTrees => return run_vm(args, VmWorkload::BinaryTrees),
        WorkloadArg::Gcbench => return run_vm(args, VmWorkload::GcBench),
        WorkloadArg::Warehouses => return run_vm(args, VmWorkload::Warehouses),
        WorkloadArg::Chat => return run_vm(args, VmWorkload::Chat),
        WorkloadArg::JavacLike => return run_vm(args, VmWorkload::JavacLike),
    };
    if args.end_of_cycle.is_some() {
        return Err(
            "--end-of-cycle applies to the VM workloads (alloc-array and alloc-object with \
             --vm): the native loops reset their heap when it is full, with the default"
                .into(),
        );
    }
    let spec = RunSpec {
        workload,
        mode: args.mode,
        tlab: args.tlab_size,
        threads: args.threads,
        objects: args.objects.unwrap_or(10_000_000),
        object_size: args.object_size,
        heap_bytes: args.heap,
        repeat: args.repeat,
        warmup: args.warmup,
        zero: args.zero,
        prefetch: args.prefetch,
        sample_bytes: args.sample_every,
        poll: args.poll,
        min_tlab: args.min_tlab,
        max_tlab: args.max_tlab,
        waste_target_percent: args.waste_target_percent,
        refill_waste_fraction: args.refill_waste_fraction,
        compute: !args.no_compute,
        middle: MiddleLevelSpec::parse_list(&args.middle)
            .map_err(|e| limits::config_error(&e, false))?,
        cpu_id: args.cpu_id,
        topology: args.topology,
    };
    let result = workload::run(&spec)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&result).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let tlab = match spec.tlab {
        TlabPolicy::Fixed(_) => spec.tlab.to_string(),
        policy => format!(
            "{policy} (ended at {})",
            ByteSize::new(result.tlab_size as usize)
        ),
    };
    println!(
        "{} mode={} tlab={} threads={} objects={}/thread size={}B heap={}",
        result.workload,
        result.mode,
        tlab,
        result.threads,
        result.objects,
        result.object_size,
        ByteSize::new(result.heap_bytes)
    );
    println!("  per-CPU support: {}", hab::per_cpu_support());
    println!(
        "  time: median {:.1} ms, min {:.1} ms over {} runs ({:.2} ns/object)",
        result.elapsed_ms_median, result.elapsed_ms_min, result.repeat, result.ns_per_alloc
    );
    println!(
        "  rate: {:.1} M objects/s, {:.0} MB/s",
        result.allocs_per_sec / 1e6,
        result.bytes_per_sec / 1e6
    );
    println!(
        "  per run: {} refills, {} slow allocs, {} waste ({:.2}%), {} collections",
        result.refills,
        result.slow_allocs,
        ByteSize::new(result.waste_bytes as usize),
        result.waste_pct,
        result.collections
    );
    if let Some(restartable) = result.cpu_labs_restartable {
        let lab = &result.cpu_lab;
        println!(
            "  per-CPU LABs: {}; {:.2} in use per collection, {} of LABs' tails wasted per run",
            if restartable {
                format!("restartable, indexed by {}", hab::rseq_slot_index())
            } else {
                "compare-and-swap (no restartable sequences here)".to_string()
            },
            lab.labs_in_use_at_collections as f64 / result.collections.max(1) as f64,
            ByteSize::new(lab.partial_waste_bytes as usize),
        );
    }
    if !result.levels.is_empty() {
        println!(
            "  middle levels ({}{}, CPU id from {}, topology {}): {} allocations, {:.2}% foreign",
            result.middle,
            if result.buffers_follow_allocation {
                " at first, then resized at each collection"
            } else {
                ""
            },
            result.cpu_id_source,
            result.topology,
            result.middle_allocs,
            result.foreign_pct
        );
        for level in &result.levels {
            println!(
                "    {}: {} buffers of {}{}, {} allocs ({:.2}% foreign), {} refills ({} cut short at the end of a cycle), {} waste",
                level.level,
                level.domains,
                ByteSize::new(level.buffer_bytes),
                if level.restartable {
                    format!(" (rseq, indexed by {})", hab::rseq_slot_index())
                } else {
                    String::new()
                },
                level.stats.allocs,
                level.foreign_pct,
                level.stats.refills,
                level.stats.short_refills,
                ByteSize::new(level.stats.waste_bytes as usize)
            );
            if level.restartable {
                println!(
                    "      rseq: {} aborts, {} fallbacks to compare-and-swap ({} from cpus beyond the array), {} chunks sidelined, {} reused",
                    level.stats.rseq_aborts,
                    level.stats.rseq_fallbacks,
                    level.stats.out_of_range_cpus,
                    level.stats.sidelined,
                    level.stats.sideline_reused
                );
            }
        }
    }
    for line in &result.thread_stats {
        println!("  {line}");
    }
    if let Some(speedup) = result.compute_speedup {
        println!(
            "  compute loop on {} threads: {speedup:.2}x one thread",
            result.threads
        );
    }
    Ok(())
}

fn run_vm(args: RunArgs, workload: VmWorkload) -> Result<(), String> {
    if args.prefetch || args.zero != ZeroMemory::Ahead || args.sample_every.is_some() || args.poll {
        return Err(
            "--prefetch, --zero, --sample-every and --poll apply to the native alloc-array and \
             alloc-object loops, not \
             to the VM (drop --vm, or these flags)"
                .into(),
        );
    }
    let spec = VmRunSpec {
        workload,
        mode: args.mode,
        tlab: args.tlab_size,
        middle: MiddleLevelSpec::parse_list(&args.middle)
            .map_err(|e| limits::config_error(&e, false))?,
        space_bytes: args.heap,
        depth: args.depth,
        threads: args.threads,
        ops: args.objects,
        rooms: args.rooms,
        live_orders: args.live_orders,
        object_size: args.object_size,
        verify: args.verify,
        log_gc: args.log_gc,
        log_tlab: args.log_tlab,
        end_of_cycle: args.end_of_cycle != Some(Switch::Off),
        cpu_id: args.cpu_id,
        topology: args.topology.clone(),
    };
    let result = vm_run::run(&spec)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&result).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    for line in &result.output {
        println!("{line}");
    }
    vm_run::print_summary(&result);
    Ok(())
}

fn topology(args: TopologyArgs) -> Result<(), String> {
    let middle =
        MiddleLevelSpec::parse_list(&args.middle).map_err(|e| limits::config_error(&e, false))?;
    let mut builder = HeapConfig::builder()
        .capacity("1GiB")
        .mode(Mode::Hab)
        .middle_levels(&middle);
    if let Some(spec) = &args.topology {
        builder = builder.simulated_topology(spec);
    }
    if let Some(source) = args.cpu_id {
        builder = builder.cpu_id(source);
    }
    let config = builder.build().map_err(|e| e.to_string())?;
    let heap = Heap::new(config, HeaderWordModel).map_err(|e| e.to_string())?;
    let topology = heap.topology();
    let source = match topology.source() {
        TopologySource::Sysfs => "read from /sys".to_string(),
        TopologySource::Guessed => "guessed (no cpu information in /sys)".to_string(),
        TopologySource::Simulated => {
            format!("simulated {}", args.topology.clone().unwrap_or_default())
        }
    };
    println!("topology ({source}):");
    print!("{topology}");
    for warning in topology.warnings() {
        println!("warning: {warning}");
    }
    println!();
    let cpu_id_source = heap.cpu_id().source();
    println!("middle levels of --middle (lowest first), in a 1GiB heap:");
    for info in heap.middle_levels() {
        let sharing = if info.domains == topology.cpu_slots() {
            "one CPU each"
        } else {
            "shared by the CPUs of each domain"
        };
        let synchronisation = match (info.restartable, cpu_id_source) {
            (true, CpuIdSource::Rseq) => {
                "restartable sequences, compare-and-swap for threads without rseq".to_string()
            }
            (true, source) => format!(
                "restartable sequences, which read the CPU from the rseq area, not {source}; \
                 compare-and-swap for threads without rseq"
            ),
            (false, _) => "compare-and-swap".to_string(),
        };
        println!(
            "  {:<8} {:>4} buffers of {:>7}  ({sharing}; {synchronisation})",
            info.level,
            info.domains,
            ByteSize::new(info.buffer_bytes).to_string()
        );
    }
    println!();
    print!("`auto` picks, here:");
    for capacity in ["16MiB", "64MiB", "1GiB"] {
        let mut auto = HeapConfig::builder().capacity(capacity).mode(Mode::Hab);
        if let Some(spec) = &args.topology {
            auto = auto.simulated_topology(spec);
        }
        if let Some(source) = args.cpu_id {
            auto = auto.cpu_id(source);
        }
        let auto = auto.build().map_err(|e| e.to_string())?;
        print!(
            " {} for a {capacity} heap{}",
            MiddleLevelSpec::list_to_string(auto.middle()),
            if capacity == "1GiB" { "\n" } else { ";" }
        );
    }
    println!(
        "  (the first cycle's buffers: each collection resizes them so that each domain that \
         allocates refills its buffer about 16 times per cycle)"
    );
    let restartable = heap.middle_levels().iter().any(|info| info.restartable);
    println!(
        "CPU id: {cpu_id_source}{}",
        if restartable && cpu_id_source != CpuIdSource::Rseq {
            " (the compare-and-swap levels; restartable sections read their own)"
        } else {
            ""
        }
    );
    println!("per-CPU support: {}", hab::per_cpu_support());
    if restartable {
        println!(
            "restartable per-CPU buffers and LABs indexed by: {}",
            hab::rseq_slot_index()
        );
    } else {
        println!(
            "restartable per-CPU buffers and LABs: none in these levels (where used, indexed by \
             {})",
            hab::rseq_slot_index()
        );
    }
    Ok(())
}

fn cpu_id(args: CpuIdArgs) -> Result<(), String> {
    limits::at_least_one("--calls", args.calls.try_into().unwrap_or(usize::MAX))?;
    let slots = Topology::discover().cpu_slots();
    if let Some(source) = args.source {
        let reader = CpuIdReader::new(source, slots)?;
        let thread = SimulatedCpu::new(&reader, 0);
        let mut sum = 0usize;
        for _ in 0..args.calls {
            sum = sum.wrapping_add(reader.current(std::hint::black_box(&thread)));
        }
        std::hint::black_box(sum);
        return Ok(());
    }
    for name in CpuIdSource::NAMES {
        let source: CpuIdSource = name.parse()?;
        match CpuIdReader::new(source, slots) {
            Ok(reader) => println!(
                "{name:<7} {:.2} ns per call",
                crate::machine::cpu_id_ns_per_call(&reader, args.calls)
            ),
            Err(why) => println!("{name:<7} unavailable: {why}"),
        }
    }
    Ok(())
}
