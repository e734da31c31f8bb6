//! `hab`: run allocation workloads on Hab and write reports.

mod callgrind;
mod machine;
mod report;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hab::{ByteSize, Mode, TlabPolicy, ZeroMemory};

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
}

#[derive(clap::Args)]
struct RunArgs {
    /// The workload.
    #[arg(long, value_enum, default_value = "alloc-array")]
    workload: Workload,
    /// Allocation mode: shared (CAS per object, like -XX:-UseTLAB) or tlab.
    #[arg(long, default_value = "tlab", value_parser = parse_mode)]
    mode: Mode,
    /// TLAB size (e.g. 256KiB, fixed), adaptive (HotSpot) or growing (Agesen).
    #[arg(long, default_value = "adaptive", value_parser = parse_policy)]
    tlab_size: TlabPolicy,
    /// Mutator threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Objects per thread and repetition.
    #[arg(long, default_value_t = 10_000_000)]
    objects: usize,
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
    /// Zero reused memory at refill, or never (the workloads write only the header).
    #[arg(long, default_value = "refill", value_parser = parse_zero)]
    zero: ZeroMemory,
    /// Skip timing the compute loop that normalises multi-thread scaling.
    #[arg(long)]
    no_compute: bool,
    /// Print one JSON object per line instead of a summary.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Smaller object counts and fewer repetitions: finishes in well under 2 minutes.
    #[arg(long)]
    quick: bool,
    /// Where to write README.md.
    #[arg(long, default_value = "report")]
    out: PathBuf,
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_policy(text: &str) -> Result<TlabPolicy, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_zero(text: &str) -> Result<ZeroMemory, String> {
    text.parse().map_err(|e: hab::ConfigError| e.to_string())
}

fn parse_size(text: &str) -> Result<usize, String> {
    text.parse::<ByteSize>()
        .map(ByteSize::bytes)
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run(args),
        Command::Report(args) => report::write(args.quick, &args.out),
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
    let spec = RunSpec {
        workload: args.workload,
        mode: args.mode,
        tlab: args.tlab_size,
        threads: args.threads,
        objects: args.objects,
        object_size: args.object_size,
        heap_bytes: args.heap,
        repeat: args.repeat,
        warmup: args.warmup,
        zero: args.zero,
        min_tlab: args.min_tlab,
        max_tlab: args.max_tlab,
        waste_target_percent: args.waste_target_percent,
        refill_waste_fraction: args.refill_waste_fraction,
        compute: !args.no_compute,
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
