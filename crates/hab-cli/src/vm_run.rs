//! `hab run` for the workloads that run on the VM (`hab-vm`): a garbage-collected heap whose
//! allocation space Hab manages, collected by copying when it fills.

use std::sync::Arc;
use std::time::Instant;

use hab::{ByteSize, HeapConfig, MiddleLevelSpec, Mode, TlabPolicy};
use hab_vm::workloads::alloc::{self, Alloc};
use hab_vm::workloads::chat::{self, Chat};
use hab_vm::workloads::warehouses::{self, Warehouses};
use hab_vm::workloads::{binary_trees, gcbench, javac_like, Outcome};
use hab_vm::{approximate, Vm, VmConfig};
use serde::Serialize;

use crate::limits;
use crate::workload::CpuLabResult;

/// The most orders a warehouse keeps alive (`--live-orders`): about 10 GB per warehouse.
const MAX_LIVE_ORDERS: usize = 10_000_000;

/// The VM's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmWorkload {
    /// The Benchmarks Game's binary-trees.
    BinaryTrees,
    /// Boehm's GCBench.
    GcBench,
    /// SPECjbb-like warehouses, one thread each.
    Warehouses,
    /// VolanoMark-like chat rooms of 20 mostly blocked connections.
    Chat,
    /// One thread compiling units of many small objects.
    JavacLike,
    /// Shipilëv's loop on the VM: every object kept in an array.
    AllocArray,
    /// Jaffer's loop on the VM: every object dropped.
    AllocObject,
}

impl VmWorkload {
    pub fn name(self) -> &'static str {
        match self {
            VmWorkload::BinaryTrees => "binary-trees",
            VmWorkload::GcBench => "gcbench",
            VmWorkload::Warehouses => "warehouses",
            VmWorkload::Chat => "chat",
            VmWorkload::JavacLike => "javac-like",
            VmWorkload::AllocArray => "alloc-array",
            VmWorkload::AllocObject => "alloc-object",
        }
    }
}

/// One VM run.
#[derive(Clone, Debug, PartialEq)]
pub struct VmRunSpec {
    pub workload: VmWorkload,
    pub mode: Mode,
    pub tlab: TlabPolicy,
    pub middle: Vec<MiddleLevelSpec>,
    /// The allocation space; `None` picks three times the workload's live data.
    pub space_bytes: Option<usize>,
    /// Tree depth (binary-trees, gcbench).
    pub depth: u32,
    /// Threads (warehouses).
    pub threads: usize,
    /// Work per thread: orders (warehouses), messages per connection (chat), units
    /// (javac-like); `None` picks the workload's default.
    pub ops: Option<usize>,
    /// Rooms of 20 connections (chat).
    pub rooms: usize,
    /// Orders each warehouse keeps alive.
    pub live_orders: usize,
    /// Object size in bytes (alloc-array, alloc-object).
    pub object_size: usize,
    pub verify: bool,
    pub log_gc: bool,
    pub log_tlab: bool,
    /// TLABs shrink as each cycle's space runs out (`HeapConfig::end_of_cycle`; on by
    /// default).
    pub end_of_cycle: bool,
    /// CPU-id source; `None` lets the heap choose.
    pub cpu_id: Option<hab::CpuIdSource>,
    /// A simulated topology such as `4x10x2`; `None` reads the machine's.
    pub topology: Option<String>,
}

impl VmRunSpec {
    /// Checks every number against what a run can do, before the VM is built: thread and
    /// room counts, tree depths and live orders within their limits, and a heap (twice the
    /// allocation space, for copying) that fits Hab and this machine.
    pub fn check(&self) -> Result<(), String> {
        let name = self.workload.name();
        match self.workload {
            VmWorkload::BinaryTrees | VmWorkload::GcBench => {
                if self.depth > limits::MAX_TREE_DEPTH {
                    return Err(format!(
                        "--depth {}: {name} supports trees at most {} deep",
                        self.depth,
                        limits::MAX_TREE_DEPTH
                    ));
                }
            }
            VmWorkload::Warehouses | VmWorkload::AllocArray | VmWorkload::AllocObject => {
                limits::threads("--threads", self.threads)?;
            }
            VmWorkload::Chat => {
                limits::at_least_one("--rooms", self.rooms)?;
                let connections = self.rooms.saturating_mul(chat::ROOM_SIZE);
                if connections > limits::MAX_THREADS {
                    return Err(format!(
                        "--rooms {}: {connections} connection threads; at most {} rooms ({} threads) are supported",
                        self.rooms,
                        limits::MAX_THREADS / chat::ROOM_SIZE,
                        limits::MAX_THREADS
                    ));
                }
            }
            VmWorkload::JavacLike => {}
        }
        if let Some(ops) = self.ops {
            limits::operations("--objects", ops)?;
        }
        if self.workload == VmWorkload::Warehouses {
            limits::at_least_one("--live-orders", self.live_orders)?;
            if self.live_orders > MAX_LIVE_ORDERS {
                return Err(format!(
                    "--live-orders {}: at most {MAX_LIVE_ORDERS} per warehouse are supported",
                    self.live_orders
                ));
            }
        }
        if matches!(
            self.workload,
            VmWorkload::AllocArray | VmWorkload::AllocObject
        ) {
            limits::at_least_one("--object-size", self.object_size)?;
            let factors = [
                ("--threads", self.threads),
                ("--objects", self.ops.unwrap_or(1_000_000)),
                ("--object-size", self.object_size),
            ];
            let live = limits::product(&factors)?;
            limits::heap_fits(
                live,
                &format!("{name} on the VM ({})", limits::describe(&factors)),
                false,
            )?;
        }
        let space = self.space_bytes();
        let what = match self.space_bytes {
            Some(bytes) => format!("--heap {}", ByteSize::new(bytes)),
            None => match self.workload {
                VmWorkload::BinaryTrees | VmWorkload::GcBench => {
                    format!("{name} at --depth {}", self.depth)
                }
                VmWorkload::Warehouses => format!(
                    "{name} with --threads {} --live-orders {}",
                    self.threads, self.live_orders
                ),
                _ => format!("{name} with these settings"),
            },
        };
        let reserved = space
            .checked_mul(2)
            .ok_or_else(|| format!("{what}: twice the allocation space overflows"))?;
        limits::heap_fits(
            reserved,
            &format!("{what} (twice the allocation space, for copying)"),
            true,
        )
    }

    pub fn space_bytes(&self) -> usize {
        self.space_bytes.unwrap_or_else(|| {
            let live = match self.workload {
                VmWorkload::BinaryTrees => binary_trees::max_live_bytes(self.depth),
                VmWorkload::GcBench => gcbench::max_live_bytes(self.depth),
                VmWorkload::Warehouses => warehouses::max_live_bytes(self.warehouses()),
                VmWorkload::Chat => 1 << 20,
                VmWorkload::JavacLike => 2 << 20,
                VmWorkload::AllocArray | VmWorkload::AllocObject => self.alloc().live_bytes(),
            };
            let floor = match self.workload {
                // Jaffer's heap: small enough to stay in the caches.
                VmWorkload::AllocObject => 16 << 20,
                _ => 4 << 20,
            };
            live.saturating_mul(3)
                .max(floor)
                .checked_next_multiple_of(1 << 20)
                .unwrap_or(usize::MAX)
        })
    }

    /// The `hab run` command line that runs this configuration once.
    pub fn command(&self) -> String {
        let mut command = format!(
            "hab run --workload {} --mode {} --tlab-size {} --heap {}",
            self.workload.name(),
            self.mode,
            self.tlab,
            ByteSize::new(self.space_bytes())
        );
        if !self.middle.is_empty() {
            command += &format!(
                " --middle {}",
                MiddleLevelSpec::list_to_string(&self.middle)
            );
        }
        if !self.end_of_cycle {
            command += " --end-of-cycle off";
        }
        if let Some(source) = self.cpu_id {
            command += &format!(" --cpu-id {source}");
        }
        if let Some(topology) = &self.topology {
            command += &format!(" --topology {topology}");
        }
        match self.workload {
            VmWorkload::BinaryTrees | VmWorkload::GcBench => {
                command += &format!(" --depth {}", self.depth);
            }
            VmWorkload::Warehouses => {
                command += &format!(
                    " --threads {} --live-orders {}",
                    self.threads, self.live_orders
                );
            }
            VmWorkload::Chat => command += &format!(" --rooms {}", self.rooms),
            VmWorkload::JavacLike => {}
            VmWorkload::AllocArray | VmWorkload::AllocObject => {
                command += &format!(
                    " --vm --threads {} --object-size {}",
                    self.threads, self.object_size
                );
            }
        }
        if let Some(ops) = self.ops {
            command += &format!(" --objects {ops}");
        }
        command
    }

    fn warehouses(&self) -> Warehouses {
        Warehouses {
            threads: self.threads,
            orders_per_thread: self.ops.unwrap_or(20_000) as u64,
            live_orders: self.live_orders,
        }
    }

    fn chat(&self) -> Chat {
        Chat {
            rooms: self.rooms,
            messages_per_connection: self.ops.unwrap_or(100),
        }
    }

    fn alloc(&self) -> Alloc {
        Alloc {
            threads: self.threads,
            objects: self.ops.unwrap_or(1_000_000),
            object_bytes: self.object_size,
            keep: self.workload == VmWorkload::AllocArray,
        }
    }

    /// Threads the workload runs.
    fn thread_count(&self) -> usize {
        match self.workload {
            VmWorkload::Warehouses | VmWorkload::AllocArray | VmWorkload::AllocObject => {
                self.threads
            }
            VmWorkload::Chat => self.rooms * chat::ROOM_SIZE,
            _ => 1,
        }
    }
}

/// What a VM run measured.
#[derive(Clone, Debug, Serialize)]
pub struct VmRunResult {
    pub workload: &'static str,
    pub mode: String,
    pub tlab_policy: String,
    pub middle: String,
    /// The allocation space (the reservation is twice this).
    pub heap_bytes: usize,
    pub threads: usize,
    pub depth: u32,
    pub verify: bool,
    /// What the program printed.
    pub output: Vec<String>,
    /// The `hab run` command that reproduces this run.
    pub command: String,
    pub elapsed_ms: f64,
    pub collections: u64,
    /// Collections that ended a cycle spent in per-CPU LABs.
    pub cpu_lab_collections: u64,
    pub gc_ms: f64,
    pub live_bytes_after_gc: usize,
    /// The workload's own throughput: `op` per second.
    pub ops_per_sec: f64,
    pub op: &'static str,
    /// TLABs taken, their bytes, those retired with free space, and the free space.
    pub tlabs: u64,
    pub tlab_bytes: u64,
    pub partial_tlabs: u64,
    pub tlab_waste_bytes: u64,
    /// Bytes of the objects the program allocated, in LABs of every kind and outside them.
    /// Per-CPU LABs still live at the end count whole (see `CpuLabStats::allocated_bytes`).
    pub allocated_bytes: u64,
    /// Bytes left unused in TLABs, middle-level buffers and per-CPU LABs (the fillers).
    pub waste_bytes: u64,
    /// Every counter of the heap's totals, as the library serialises them.
    pub totals: hab::AllocationStats,
    /// Per-CPU LABs (modes `cpu-lab` and `flip`).
    pub cpu_lab: CpuLabResult,
}

pub fn run(spec: &VmRunSpec) -> Result<VmRunResult, String> {
    spec.check()?;
    let mut heap = HeapConfig::builder()
        .mode(spec.mode)
        .tlab(spec.tlab)
        .end_of_cycle(spec.end_of_cycle)
        .middle_levels(&spec.middle);
    if let Some(source) = spec.cpu_id {
        heap = heap.cpu_id(source);
    }
    if let Some(topology) = &spec.topology {
        heap = heap.simulated_topology(topology);
    }
    let config = VmConfig {
        heap,
        verify: spec.verify,
        log_gc: spec.log_gc,
        log_tlab: spec.log_tlab,
        ..VmConfig::new(spec.space_bytes())
    };
    let vm: Arc<Vm> = Vm::new(config).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let outcome = match spec.workload {
        VmWorkload::BinaryTrees => binary_trees::run(&vm, spec.depth).map(|lines| Outcome {
            lines,
            ops: binary_trees::checked_nodes(spec.depth),
            op: "tree nodes checked",
        }),
        VmWorkload::GcBench => gcbench::run(&vm, spec.depth),
        VmWorkload::Warehouses => warehouses::run(&vm, spec.warehouses()),
        VmWorkload::Chat => chat::run(&vm, spec.chat()),
        VmWorkload::JavacLike => javac_like::run(&vm, spec.ops.unwrap_or(200), 2000),
        VmWorkload::AllocArray | VmWorkload::AllocObject => alloc::run(&vm, spec.alloc()),
    }
    .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed().as_secs_f64();
    let records = vm.gc_records();
    let stats = vm.heap_stats();
    let totals = stats.totals;
    Ok(VmRunResult {
        command: spec.command(),
        workload: spec.workload.name(),
        mode: spec.mode.to_string(),
        tlab_policy: spec.tlab.to_string(),
        middle: MiddleLevelSpec::list_to_string(&spec.middle),
        heap_bytes: spec.space_bytes(),
        threads: spec.thread_count(),
        depth: spec.depth,
        verify: spec.verify,
        output: outcome.lines,
        elapsed_ms: elapsed * 1e3,
        collections: records.len() as u64,
        cpu_lab_collections: records.iter().filter(|r| r.in_plabs).count() as u64,
        // `+ 0.0` turns the empty sum (-0.0) into 0.
        gc_ms: records
            .iter()
            .map(|r| r.pause.as_secs_f64() * 1e3)
            .sum::<f64>()
            + 0.0,
        live_bytes_after_gc: vm.live_bytes_after_gc(),
        ops_per_sec: outcome.ops as f64 / elapsed,
        op: outcome.op,
        tlabs: totals.refills,
        tlab_bytes: totals.tlab_bytes,
        partial_tlabs: totals.partial_tlabs,
        tlab_waste_bytes: totals.tlab_waste_bytes(),
        allocated_bytes: totals.allocated_bytes(),
        waste_bytes: totals.waste_bytes(),
        totals,
        cpu_lab: CpuLabResult::from(totals.cpu_lab),
    })
}

/// The summary `hab run` prints after the program's own lines.
pub fn print_summary(result: &VmRunResult) {
    println!(
        "{} threads={} mode={} tlab={} heap={}{}",
        result.workload,
        result.threads,
        result.mode,
        result.tlab_policy,
        ByteSize::new(result.heap_bytes),
        if result.verify { " verified" } else { "" }
    );
    println!(
        "  time: {:.1} ms, {:.1} M {}/s",
        result.elapsed_ms,
        result.ops_per_sec / 1e6,
        result.op
    );
    println!(
        "  collections: {} ({} in per-CPU LABs), {:.1} ms of pauses, {} live after the last",
        result.collections,
        result.cpu_lab_collections,
        result.gc_ms,
        approximate(result.live_bytes_after_gc)
    );
    println!(
        "  TLABs: {} taken ({}), {} partially used, {} unused",
        result.tlabs,
        approximate(result.tlab_bytes as usize),
        result.partial_tlabs,
        approximate(result.tlab_waste_bytes as usize)
    );
    let p = &result.cpu_lab;
    if p.labs + p.fallback_allocs > 0 {
        println!(
            "  per-CPU LABs: {} taken ({}), {} transactions ({} failed, {} invalid), {} sidelined, {} partially used ({} unused), {} aborts, {} fallback allocations",
            p.labs,
            approximate(p.lab_bytes as usize),
            p.transactions,
            p.failed_transactions,
            p.invalid_transactions,
            p.sidelined_labs,
            p.partial_labs,
            approximate(p.partial_waste_bytes as usize),
            p.rseq_aborts,
            p.fallback_allocs
        );
    }
}
