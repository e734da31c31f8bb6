//! What the middle levels did: their figures for a runtime (`hab.h`, "The middle levels on
//! their own": `hab_levels_stats`, `hab_level_stats_line`, `hab_levels_stats_json`, and the
//! totals beside them).

use crate::levels::hab_levels;
use crate::prelude::*;
use hab::{Level, LevelStats};

/// The levels' statistics as JSON, as `hab_stats_json` writes.
///
/// # Safety
/// `levels` is NULL or live; `buffer` NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_stats_json(
    levels: *mut hab_levels,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Ok(levels) = (unsafe { live(levels, "hab_levels_stats_json", "levels") }) else {
        return 0;
    };
    let mut stats = Vec::new();
    if guarded(|| {
        stats = levels.levels.stats();
        HAB_OK
    }) != HAB_OK
    {
        return 0;
    }
    let stats: Vec<_> = stats
        .into_iter()
        .map(|(level, stats)| serde_json::json!({ "level": level.name(), "stats": stats }))
        .collect();
    // SAFETY: the caller's contract.
    unsafe { write_json(&serde_json::Value::from(stats), buffer, len) }
}

/// The largest TLAB the levels hand out (the `max_tlab_bytes` given, or the lowest level's
/// buffer where that was 0); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_max_tlab_bytes(levels: *mut hab_levels) -> usize {
    // SAFETY: the caller's contract.
    unsafe { live(levels, "hab_levels_max_tlab_bytes", "levels") }
        .map_or(0, |levels| levels.levels.max_tlab_bytes())
}

/// The largest TLAB `hab_levels_carve_tlab` hands out now, beside the minimum it is asked
/// for: near the end of the upstream's space, the lowest level's buffers' share of what the
/// upstream's `free_bytes` says is left; `SIZE_MAX` where the upstream has no `free_bytes`;
/// 0 for NULL levels. A runtime that also carves TLABs from the per-CPU buffers itself keeps
/// them within it.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_tlab_limit_bytes(levels: *mut hab_levels) -> usize {
    // SAFETY: the caller's contract.
    let Ok(levels) = (unsafe { live(levels, "hab_levels_tlab_limit_bytes", "levels") }) else {
        return 0;
    };
    let mut limit = 0;
    guarded(|| {
        limit = levels.levels.tlab_limit_bytes();
        HAB_OK
    });
    limit
}

/// The most memory the levels' buffers hold at once (each level's buffer times its domains,
/// summed); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_buffered_bytes(levels: *mut hab_levels) -> usize {
    // SAFETY: the caller's contract.
    unsafe { live(levels, "hab_levels_buffered_bytes", "levels") }
        .map_or(0, |levels| levels.levels.buffered_bytes())
}

/// TLABs carved straight from the upstream, every level's buffers being busy or too small
/// (counted by no level); 0 for NULL levels.
///
/// # Safety
/// `levels` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_tlabs_past_levels(levels: *mut hab_levels) -> u64 {
    // SAFETY: the caller's contract.
    let Ok(levels) = (unsafe { live(levels, "hab_levels_tlabs_past_levels", "levels") }) else {
        return 0;
    };
    let mut count = 0;
    guarded(|| {
        count = levels.levels.tlabs_past_levels();
        HAB_OK
    });
    count
}

/// One level's figures: `hab_level_stats` in `hab.h` (what `hab_levels_stats` fills): the
/// level's name, then [`hab::LevelStats`] as it is (`#[repr(C)]`, every field a `u64`), whose
/// fields the header lists flat, in the order of [`hab::LevelStats::NAMES`]
/// (`tests/header.rs` checks both).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hab_level_stats {
    /// The level's name (`cpu`, `core`, `llc`, `package`, `node`): a static string.
    pub level: *const c_char,
    /// The level's figures.
    pub figures: LevelStats,
}

impl hab_level_stats {
    /// `figures` of `level`, for C.
    fn new(level: Level, figures: &LevelStats) -> Self {
        hab_level_stats {
            level: level.c_name().as_ptr(),
            figures: *figures,
        }
    }

    /// The figures, back in Rust.
    fn figures(&self) -> LevelStats {
        self.figures
    }
}

/// Writes each level's figures, lowest first, into `out` (up to `capacity` of them); returns
/// the number of levels (0 on error, with the reason in `hab_last_error`).
///
/// # Safety
/// `levels` is NULL or live; `out` NULL or writable for `capacity` entries.
#[no_mangle]
pub unsafe extern "C" fn hab_levels_stats(
    levels: *mut hab_levels,
    out: *mut hab_level_stats,
    capacity: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Ok(levels) = (unsafe { live(levels, "hab_levels_stats", "levels") }) else {
        return 0;
    };
    let mut count = 0;
    guarded(|| {
        let stats = levels.levels.stats();
        count = stats.len();
        for (i, (level, figures)) in stats.into_iter().take(capacity).enumerate() {
            if out.is_null() {
                break;
            }
            let entry = hab_level_stats::new(level, &figures);
            // SAFETY: `i < capacity`, and `out` holds `capacity` entries (the caller's
            // contract).
            unsafe { out.add(i).write(entry) };
        }
        HAB_OK
    });
    count
}

/// Writes the figures of `now` less those of `since` (NULL: none; `buffer_bytes`, a size, is
/// `now`'s) that are not zero, as
/// `name: value` pairs (the names of `hab_level_stats`' fields, bytes exact), NUL-terminated,
/// into `buffer` when its `len` bytes hold them; returns the text's length (0 also when every
/// figure is zero, or on error, recorded). The line of a runtime's log, in the library's words.
///
/// # Safety
/// `now` is NULL or readable; `since` NULL or readable; `buffer` NULL or writable for `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn hab_level_stats_line(
    now: *const hab_level_stats,
    since: *const hab_level_stats,
    buffer: *mut c_char,
    len: usize,
) -> usize {
    // SAFETY: the caller's contract.
    let Ok(now) = (unsafe { live(now, "hab_level_stats_line", "now") }) else {
        return 0;
    };
    // SAFETY: the caller's contract.
    let since = unsafe { since.as_ref() }.map_or_else(LevelStats::default, |since| since.figures());
    let mut line = String::new();
    now.figures()
        .since(&since)
        .write_figures(&mut line)
        .expect("a String takes any text");
    // SAFETY: the caller's contract.
    unsafe { write_text(&line, buffer, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `LevelStats` whose figures all differ.
    fn distinct() -> LevelStats {
        let mut figures = LevelStats::default();
        for (i, name) in LevelStats::NAMES.iter().enumerate() {
            assert!(figures.set_figure(name, 10_000 + i as u64));
        }
        figures
    }

    /// C reads the figures flat after the name: one `u64` each, in `NAMES`' order, from the
    /// second word on.
    #[test]
    fn the_figures_lie_flat_after_the_name() {
        assert_eq!(std::mem::offset_of!(hab_level_stats, figures), 8);
        assert_eq!(
            std::mem::size_of::<hab_level_stats>(),
            8 + 8 * LevelStats::NAMES.len()
        );
        let c = hab_level_stats::new(Level::Cpu, &distinct());
        // SAFETY: `figures` is `#[repr(C)]` and all `u64`s (the sizes above), so it reads as
        // an array of them.
        let flat = unsafe {
            std::slice::from_raw_parts(
                std::ptr::addr_of!(c.figures).cast::<u64>(),
                LevelStats::NAMES.len(),
            )
        };
        let named: Vec<(&str, u64)> = c.figures.named_figures().collect();
        let expected: Vec<(&str, u64)> = LevelStats::NAMES
            .iter()
            .copied()
            .zip(flat.iter().copied())
            .collect();
        assert_eq!(named, expected);
    }

    #[test]
    fn the_c_struct_carries_every_figure_to_its_own_field() {
        let figures = distinct();
        let c = hab_level_stats::new(Level::Core, &figures);
        assert_eq!(c.figures(), figures);
        // SAFETY: `level` is one of `Level::c_name`'s static strings.
        assert_eq!(unsafe { CStr::from_ptr(c.level) }.to_str(), Ok("core"));
    }

    #[test]
    fn the_log_line_names_each_figure_that_changed() {
        let now = hab_level_stats::new(Level::Cpu, &distinct());
        let mut earlier = distinct();
        earlier.allocs -= 5;
        earlier.waste_bytes -= 4096;
        let since = hab_level_stats::new(Level::Cpu, &earlier);
        let mut buffer = [0 as c_char; 64];
        // SAFETY: both structs are live; the buffer holds 64 bytes.
        let len = unsafe { hab_level_stats_line(&now, &since, buffer.as_mut_ptr(), 64) };
        // SAFETY: the call wrote a NUL-terminated text into the buffer.
        let line = unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_str().unwrap();
        // The counts that changed, and the size (a gauge, the last figure) as it is now.
        let size = 10_000 + LevelStats::NAMES.len() - 1;
        assert_eq!(
            line,
            format!("allocs: 5 waste_bytes: 4096 buffer_bytes: {size}")
        );
        assert_eq!(len, line.len());
        // Too small a buffer: the length needed, nothing written.
        let mut small = [7 as c_char; 4];
        // SAFETY: as above, with 4 bytes.
        let needed = unsafe { hab_level_stats_line(&now, &since, small.as_mut_ptr(), 4) };
        assert_eq!((needed, small), (line.len(), [7; 4]));
        // No `since`: every figure.
        // SAFETY: `now` is live; a NULL buffer is only measured.
        let whole = unsafe { hab_level_stats_line(&now, ptr::null(), ptr::null_mut(), 0) };
        assert!(
            whole > LevelStats::NAMES.len() * "name: 10000".len(),
            "{whole}"
        );
        // SAFETY: a NULL `now` is refused.
        let refused = unsafe { hab_level_stats_line(ptr::null(), ptr::null(), ptr::null_mut(), 0) };
        assert_eq!(refused, 0);
    }
}
