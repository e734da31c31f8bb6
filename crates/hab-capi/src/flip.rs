//! The flip policy (`hab.h`: "The flip between TLABs and per-CPU LABs"): the one rule Hab's
//! `flip` mode follows, for a runtime that flips its own LABs (HotSpot's per-CPU LABs).

use crate::prelude::*;

/// One cycle as the flip policy reads it (`hab::FlipCycle`; see `hab.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct hab_flip_cycle {
    /// Nonzero: the cycle allocated in per-CPU LABs.
    pub in_cpu_labs: c_int,
    /// Nonzero: the first cycle.
    pub first: c_int,
    pub unused_tlab_bytes: u64,
    pub unused_lab_bytes: u64,
    pub lab_bytes: u64,
    pub cpus: u64,
    pub running_threads: u64,
    pub cycle_bytes: u64,
    pub min_unused_tlab_percent: u64,
    pub previous_cycles_over_bound: u64,
}

/// Whether the next cycle allocates in per-CPU LABs: 1 or 0; -1 for a NULL `cycle`
/// (`HAB_INVALID_ARGUMENT`).
///
/// # Safety
/// `cycle` is NULL or points to a readable `hab_flip_cycle`.
#[no_mangle]
pub unsafe extern "C" fn hab_flip_next_in_cpu_labs(cycle: *const hab_flip_cycle) -> c_int {
    // SAFETY: the caller's contract: NULL or a readable struct.
    let Some(cycle) = (unsafe { cycle.as_ref() }) else {
        fail(
            HAB_INVALID_ARGUMENT,
            "hab_flip_next_in_cpu_labs: cycle is NULL",
        );
        return -1;
    };
    c_int::from(flip_cycle(cycle).next_in_cpu_labs())
}

/// The judged cycles in TLABs in a row, `cycle` included, that left tails over the bound
/// (`hab::FlipCycle::cycles_over_bound`): what the next judged cycle passes as
/// `previous_cycles_over_bound`. 0 for a NULL `cycle` (`HAB_INVALID_ARGUMENT`).
///
/// # Safety
/// `cycle` is NULL or points to a readable `hab_flip_cycle`.
#[no_mangle]
pub unsafe extern "C" fn hab_flip_cycles_over_bound(cycle: *const hab_flip_cycle) -> u64 {
    // SAFETY: the caller's contract: NULL or a readable struct.
    let Some(cycle) = (unsafe { cycle.as_ref() }) else {
        fail(
            HAB_INVALID_ARGUMENT,
            "hab_flip_cycles_over_bound: cycle is NULL",
        );
        return 0;
    };
    flip_cycle(cycle).cycles_over_bound()
}

/// The library's view of a C cycle.
fn flip_cycle(cycle: &hab_flip_cycle) -> hab::FlipCycle {
    hab::FlipCycle {
        in_cpu_labs: cycle.in_cpu_labs != 0,
        first: cycle.first != 0,
        unused_tlab_bytes: cycle.unused_tlab_bytes,
        unused_lab_bytes: cycle.unused_lab_bytes,
        lab_bytes: cycle.lab_bytes,
        cpus: cycle.cpus,
        running_threads: cycle.running_threads,
        cycle_bytes: cycle.cycle_bytes,
        min_unused_tlab_percent: cycle.min_unused_tlab_percent,
        previous_cycles_over_bound: cycle.previous_cycles_over_bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_entry_decides_as_the_library() {
        let cycle = hab_flip_cycle {
            unused_tlab_bytes: 40 << 20,
            lab_bytes: 64 << 10,
            cpus: 2,
            running_threads: 1000,
            cycle_bytes: 64 << 20,
            min_unused_tlab_percent: 10,
            previous_cycles_over_bound: 2,
            ..Default::default()
        };
        // SAFETY: a live struct.
        assert_eq!(unsafe { hab_flip_next_in_cpu_labs(&cycle) }, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { hab_flip_cycles_over_bound(&cycle) }, 3);
        let once = hab_flip_cycle {
            previous_cycles_over_bound: 0,
            ..cycle
        };
        // SAFETY: as above.
        assert_eq!(unsafe { hab_flip_next_in_cpu_labs(&once) }, 0);
        let first = hab_flip_cycle { first: 1, ..cycle };
        // SAFETY: as above.
        assert_eq!(unsafe { hab_flip_next_in_cpu_labs(&first) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { hab_flip_cycles_over_bound(&first) }, 0);
        // SAFETY: NULL is allowed, and refused.
        assert_eq!(unsafe { hab_flip_cycles_over_bound(std::ptr::null()) }, 0);
        assert_eq!(hab_last_status(), HAB_INVALID_ARGUMENT);
        // SAFETY: NULL is allowed, and refused.
        assert_eq!(unsafe { hab_flip_next_in_cpu_labs(std::ptr::null()) }, -1);
        assert_eq!(hab_last_status(), HAB_INVALID_ARGUMENT);
        // SAFETY: the thread's last error, a NUL-terminated string.
        let message = unsafe { CStr::from_ptr(hab_last_error()) };
        assert!(message.to_string_lossy().contains("NULL"));
    }
}
