//! The report's data files: `results.jsonl` (every run, one JSON line each) and `data/*.csv`
//! (every measured point, one row per run, with the command that reproduces it).

use std::fs;
use std::path::Path;

use super::shared::Measured;
use super::vm;

/// Writes `results.jsonl` and `data/*.csv` into `out`.
pub(super) fn write_all(
    out: &Path,
    measured: &Measured,
    vm_runs: &[vm::Runs],
) -> Result<(), String> {
    let mut lines = String::new();
    for (_, result) in &measured.runs {
        lines.push_str(&serde_json::to_string(result).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    for result in vm::results(vm_runs) {
        lines.push_str(&serde_json::to_string(result).map_err(|e| e.to_string())?);
        lines.push('\n');
    }
    fs::write(out.join("results.jsonl"), lines).map_err(|e| e.to_string())?;
    write_data(out, measured, vm_runs)
}

/// One row of `alloc-runs.csv`: a workload run (times with min, median and max over the
/// repetitions).
#[derive(serde::Serialize)]
struct AllocRow<'a> {
    workload: String,
    mode: String,
    tlab: String,
    middle: &'a str,
    threads: usize,
    object_bytes: usize,
    objects_per_thread: usize,
    heap_bytes: usize,
    zero: String,
    ms_min: f64,
    ms_median: f64,
    ms_max: f64,
    ns_per_object: f64,
    objects_per_sec: f64,
    refills: u64,
    slow_allocs: u64,
    waste_bytes: u64,
    collections: u64,
    foreign_allocs: u64,
    cpu_lab_labs: u64,
    cpu_lab_partial_waste_bytes: u64,
    command: String,
}

/// One row of `vm-runs.csv`: a run of a workload on Hab's VM.
#[derive(serde::Serialize)]
struct VmRow<'a> {
    workload: String,
    mode: String,
    tlab: String,
    middle: &'a str,
    threads: usize,
    heap_bytes: usize,
    ms: f64,
    ops_per_sec: f64,
    op: &'a str,
    collections: u64,
    cpu_lab_collections: u64,
    gc_ms: f64,
    live_bytes_after_gc: usize,
    tlabs: u64,
    partial_tlabs: u64,
    tlab_waste_bytes: u64,
    cpu_lab_labs: u64,
    cpu_lab_transactions: u64,
    cpu_lab_failed: u64,
    cpu_lab_invalid: u64,
    cpu_lab_sidelined: u64,
    cpu_lab_partial: u64,
    cpu_lab_partial_waste_bytes: u64,
    command: &'a str,
}

/// `value` to `decimals` places: the precision a measured figure carries in the CSV files.
fn rounded(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// Writes `rows` to `path` as CSV with a header row.
fn write_csv<T: serde::Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> Result<(), String> {
    let fail = |e: csv::Error| format!("cannot write {}: {e}", path.display());
    let mut writer = csv::Writer::from_path(path).map_err(fail)?;
    for row in rows {
        writer.serialize(row).map_err(fail)?;
    }
    writer
        .flush()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `DIR/data/*.csv`: every measured point, one row per run.
pub(super) fn write_data(
    out: &Path,
    measured: &Measured,
    vm_runs: &[vm::Runs],
) -> Result<(), String> {
    let dir = out.join("data");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let alloc = measured.runs.iter().map(|(spec, r)| AllocRow {
        workload: r.workload.to_string(),
        mode: r.mode.to_string(),
        tlab: spec.tlab.to_string(),
        middle: &r.middle,
        threads: r.threads,
        object_bytes: r.object_size,
        objects_per_thread: r.objects,
        heap_bytes: r.heap_bytes,
        zero: r.zero.to_string(),
        ms_min: rounded(r.elapsed_ms_min, 3),
        ms_median: rounded(r.elapsed_ms_median, 3),
        ms_max: rounded(r.elapsed_ms.iter().copied().fold(f64::MIN, f64::max), 3),
        ns_per_object: rounded(r.ns_per_alloc, 4),
        objects_per_sec: rounded(r.allocs_per_sec, 0),
        refills: r.refills,
        slow_allocs: r.slow_allocs,
        waste_bytes: r.waste_bytes,
        collections: r.collections,
        foreign_allocs: r.foreign_allocs,
        cpu_lab_labs: r.cpu_lab.labs,
        cpu_lab_partial_waste_bytes: r.cpu_lab.partial_waste_bytes,
        command: spec.command(),
    });
    write_csv(&dir.join("alloc-runs.csv"), alloc)?;
    let vm = vm::results(vm_runs).map(|r| VmRow {
        workload: r.workload.to_string(),
        mode: r.mode.to_string(),
        tlab: r.tlab_policy.to_string(),
        middle: &r.middle,
        threads: r.threads,
        heap_bytes: r.heap_bytes,
        ms: rounded(r.elapsed_ms, 3),
        ops_per_sec: rounded(r.ops_per_sec, 1),
        op: r.op,
        collections: r.collections,
        cpu_lab_collections: r.cpu_lab_collections,
        gc_ms: rounded(r.gc_ms, 3),
        live_bytes_after_gc: r.live_bytes_after_gc,
        tlabs: r.tlabs,
        partial_tlabs: r.partial_tlabs,
        tlab_waste_bytes: r.tlab_waste_bytes,
        cpu_lab_labs: r.cpu_lab.labs,
        cpu_lab_transactions: r.cpu_lab.transactions,
        cpu_lab_failed: r.cpu_lab.failed_transactions,
        cpu_lab_invalid: r.cpu_lab.invalid_transactions,
        cpu_lab_sidelined: r.cpu_lab.sidelined_labs,
        cpu_lab_partial: r.cpu_lab.partial_labs,
        cpu_lab_partial_waste_bytes: r.cpu_lab.partial_waste_bytes,
        command: &r.command,
    });
    write_csv(&dir.join("vm-runs.csv"), vm)
}

#[cfg(test)]
mod tests {
    use super::{rounded, write_csv};

    #[test]
    fn csv_figures_keep_their_precision() {
        assert_eq!(rounded(3.4639710000000004, 3), 3.464);
        assert_eq!(rounded(1105634534.7158186, 0), 1105634535.0);
    }

    #[test]
    fn csv_rows_get_a_header_and_quoting() {
        #[derive(serde::Serialize)]
        struct Row<'a> {
            mode: &'a str,
            ms: f64,
            command: &'a str,
        }
        let path = std::env::temp_dir().join(format!("hab-csv-{}.csv", std::process::id()));
        let rows = [Row {
            mode: "cpu-lab",
            ms: 1.5,
            command: "hab run --middle core:1MiB,package:4MiB",
        }];
        write_csv(&path, rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            text,
            "mode,ms,command\ncpu-lab,1.5,\"hab run --middle core:1MiB,package:4MiB\"\n"
        );
    }
}
