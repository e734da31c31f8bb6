//! What `hab run` accepts: every number the user gives is checked here, with checked
//! arithmetic, before anything is allocated or a thread started. Each message names the
//! user's own flag and says what would be accepted.

use hab::{ByteSize, ConfigError, MAX_CAPACITY_BYTES};

/// The most threads a run starts (native workloads, warehouses, chat connections): enough
/// for the seeds' experiments with thousands of threads, far below what makes thread
/// creation itself fail.
pub const MAX_THREADS: usize = 4096;

/// The deepest tree of binary-trees and GCBench: its live data (2^(depth+2) nodes) then
/// stays below a terabyte, and the recursion well inside a thread's stack.
pub const MAX_TREE_DEPTH: u32 = 32;

/// The most repetitions (and warm-up runs) a run makes: far more than a measurement needs,
/// few enough that the per-repetition records fit in memory at once.
pub const MAX_REPEATS: usize = 10_000;

/// The most operations a VM workload runs (orders, messages, compilation units, objects per
/// thread): far beyond the seeds' sizes, and a run that ends.
pub const MAX_OPERATIONS: usize = 1_000_000_000;

/// A repetition count of `flag` (`--repeat`, `--warmup`) within
/// [`MAX_REPEATS`]; at least 1 unless `zero_ok`.
pub fn repetitions(flag: &str, value: usize, zero_ok: bool) -> Result<(), String> {
    if !zero_ok {
        at_least_one(flag, value)?;
    }
    if value > MAX_REPEATS {
        return Err(format!(
            "{flag} {value}: at most {MAX_REPEATS} are supported"
        ));
    }
    Ok(())
}

/// An operation count of `flag` in `1..=MAX_OPERATIONS`.
pub fn operations(flag: &str, value: usize) -> Result<(), String> {
    at_least_one(flag, value)?;
    if value > MAX_OPERATIONS {
        return Err(format!(
            "{flag} {value}: at most {MAX_OPERATIONS} are supported"
        ));
    }
    Ok(())
}

/// `value` of `flag` is at least 1.
pub fn at_least_one(flag: &str, value: usize) -> Result<(), String> {
    if value == 0 {
        return Err(format!("{flag} 0: must be at least 1"));
    }
    Ok(())
}

/// A thread count of `flag` in `1..=MAX_THREADS`.
pub fn threads(flag: &str, value: usize) -> Result<(), String> {
    at_least_one(flag, value)?;
    if value > MAX_THREADS {
        return Err(format!(
            "{flag} {value}: at most {MAX_THREADS} threads are supported"
        ));
    }
    Ok(())
}

/// `factors` (flag, value) multiplied, or an error naming them when the product overflows.
pub fn product(factors: &[(&str, usize)]) -> Result<usize, String> {
    factors
        .iter()
        .try_fold(1usize, |product, (_, value)| product.checked_mul(*value))
        .ok_or_else(|| format!("{} overflows", describe(factors)))
}

/// `--threads 2 × --objects 10 × --object-size 16`.
pub fn describe(factors: &[(&str, usize)]) -> String {
    factors
        .iter()
        .map(|(flag, value)| format!("{flag} {value}"))
        .collect::<Vec<_>>()
        .join(" × ")
}

/// A heap of `bytes` for `what` fits Hab's limit and, when every page of it will be used
/// (`touched`), the memory this process may use.
pub fn heap_fits(bytes: usize, what: &str, touched: bool) -> Result<(), String> {
    if bytes > MAX_CAPACITY_BYTES {
        return Err(format!(
            "{what} needs a heap of {}, more than Hab's {} limit",
            approximate(bytes),
            ByteSize::new(MAX_CAPACITY_BYTES)
        ));
    }
    if touched {
        if let Some(limit) = hab::memory_limit_bytes() {
            if bytes > limit {
                return Err(format!(
                    "{what} needs a heap of {}, more than the {} of memory this process may use",
                    approximate(bytes),
                    approximate(limit)
                ));
            }
        }
    }
    Ok(())
}

/// `bytes` for a message: exact below 1 GiB, else GiB with one decimal.
fn approximate(bytes: usize) -> String {
    if bytes < 1 << 30 {
        ByteSize::new(bytes).to_string()
    } else {
        format!("{:.1}GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// The `hab run` flag that sets a heap configuration field, or how the value was derived.
fn flag_of(field: &str, heap_given: bool) -> &'static str {
    match field {
        "capacity" if heap_given => "--heap",
        "capacity" => "the heap sized for the workload",
        "tlab" => "--tlab-size",
        "min_tlab" => "--min-tlab",
        "max_tlab" => "--max-tlab",
        "waste_target_percent" => "--waste-target-percent",
        "refill_waste_fraction" => "--refill-waste-fraction",
        "middle" => "--middle",
        "cpu_id" => "--cpu-id",
        "topology" => "--topology",
        _ => "the heap configuration",
    }
}

/// A configuration error in terms of `hab run`'s flags.
pub fn config_error(error: &ConfigError, heap_given: bool) -> String {
    format!(
        "{}: {} ({})",
        flag_of(error.field(), heap_given),
        error.problem(),
        error.field()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_overflow_name_their_flags() {
        let error = product(&[("--threads", 2), ("--objects", usize::MAX)]).unwrap_err();
        assert_eq!(
            error,
            format!("--threads 2 × --objects {} overflows", usize::MAX)
        );
        assert_eq!(product(&[("--a", 3), ("--b", 4)]), Ok(12));
    }

    #[test]
    fn thread_counts_are_bounded() {
        assert!(threads("--threads", 0).unwrap_err().contains("at least 1"));
        assert!(threads("--threads", MAX_THREADS + 1)
            .unwrap_err()
            .contains("at most 4096"));
        assert_eq!(threads("--threads", MAX_THREADS), Ok(()));
    }

    #[test]
    fn heaps_beyond_memory_are_refused_only_when_touched() {
        let limit = hab::memory_limit_bytes().expect("this machine reports its memory");
        let error = heap_fits(limit + 1, "alloc-array", true).unwrap_err();
        assert!(error.contains("of memory this process may use"), "{error}");
        assert_eq!(heap_fits(limit + 1, "alloc-object", false), Ok(()));
        assert!(heap_fits(MAX_CAPACITY_BYTES + 1, "x", false)
            .unwrap_err()
            .contains("limit"));
    }
}
