//! Fuzzing `hab_config_set` and `hab_heap_new` with proptest: sequences of keys (real ones and
//! near misses) set to values from the grammar's tokens or arbitrary text, NULL arguments among
//! them, then a heap built from the result. Every call returns a status (never
//! `HAB_INTERNAL_ERROR`, which is a caught panic), refusals leave a message naming the key, and
//! a heap that builds can be freed. `HAB_FUZZ_CASES` sets the sequences (default 1000); the
//! test prints how many calls it made and what they returned.

use std::cell::Cell;
use std::ffi::{c_void, CStr, CString};
use std::ptr;

use hab_capi::hab_status::{self, *};
use hab_capi::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const KEYS: &[&str] = &[
    "capacity",
    "mode",
    "middle",
    "tlab",
    "min_tlab",
    "max_tlab",
    "zero",
    "alignment",
    "refill_waste_fraction",
    "waste_target_percent",
    "end_of_cycle",
    "cpu_id",
    "Capacity",
    "middle ",
    "",
    "pretouch_",
    "max-tlab",
];

const TOKENS: &[&str] = &[
    "cpu",
    "core",
    "package",
    "auto",
    ":",
    ",",
    " ",
    "0",
    "1",
    "8",
    "12",
    "4096",
    "-1",
    "1.5",
    "nan",
    "inf",
    "18446744073709551615",
    "99999999999999999999",
    "K",
    "KiB",
    "M",
    "MiB",
    "G",
    "T",
    "TiB",
    "B",
    "true",
    "false",
    "hab",
    "tlab",
    "cpu-lab",
    "flip",
    "shared",
    "adaptive",
    "growing",
    "ahead",
    "refill",
    "never",
    "rseq",
    "getcpu",
    "rdpid",
    "sim",
    "é",
];

/// Values a key takes (and some it refuses), so that sequences reach `hab_heap_new`'s checks
/// of combinations.
fn good_values(key: &str) -> &'static [&'static str] {
    match key {
        "capacity" => &["4MiB", "64MiB", "1GiB", "16TiB", "8", "1"],
        "mode" => &["hab", "tlab", "cpu-lab", "flip", "shared"],
        "middle" => &[
            "auto",
            "core:1MiB",
            "cpu:256KiB,package:32MiB",
            "cpu:64",
            "node:1GiB",
        ],
        "tlab" => &["adaptive", "growing", "64KiB", "8", "24"],
        "min_tlab" | "max_tlab" => &["2KiB", "1MiB", "768KiB", "8", "16TiB"],
        "zero" => &["ahead", "refill", "never"],
        "alignment" => &["8", "16", "4096", "3", "8192"],
        "refill_waste_fraction" => &["64", "1", "0"],
        "waste_target_percent" => &["1", "50", "0.5", "nan", "-1"],
        "end_of_cycle" => &["true", "false"],
        "cpu_id" => &["rseq", "getcpu", "rdpid", "sim:0.5:1"],
        _ => &["1"],
    }
}

/// A key and its value: one the key takes, text from the grammar's tokens, arbitrary text,
/// or NULL.
fn key_and_value() -> impl Strategy<Value = (&'static str, Option<String>)> {
    prop::sample::select(KEYS).prop_flat_map(|key| {
        let text = prop_oneof![
            3 => prop::sample::select(good_values(key)).prop_map(str::to_string),
            1 => "[^\u{0}]{0,24}",
            1 => prop::collection::vec(prop::sample::select(TOKENS), 0..6)
                .prop_map(|t| t.concat()),
        ];
        (
            Just(key),
            prop_oneof![1 => Just(None), 30 => text.prop_map(Some)],
        )
    })
}

unsafe extern "C" fn object_size(_: *mut c_void, object: *const c_void) -> usize {
    // SAFETY: only called on objects this test never allocates (no heap here is used).
    unsafe { *(object as *const usize) }
}
unsafe extern "C" fn write_filler(_: *mut c_void, _: *mut c_void, _: usize) {}
unsafe extern "C" fn is_filler(_: *mut c_void, _: *const c_void) -> i32 {
    0
}

#[test]
fn configurations_set_and_build_without_a_panic() {
    let cases = std::env::var("HAB_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(1000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let sequence = prop::collection::vec(key_and_value(), 1..6);
    let (calls, accepted, heaps) = (Cell::new(0u64), Cell::new(0u64), Cell::new(0u64));
    let model = hab_object_model {
        object_size: Some(object_size),
        write_filler: Some(write_filler),
        is_filler: Some(is_filler),
        min_filler_bytes: 8,
        user: ptr::null_mut(),
    };
    runner
        .run(&sequence, |sequence| {
            let config = hab_config_new();
            for (key, value) in &sequence {
                let key = CString::new(*key).unwrap();
                let value = value.as_ref().map(|v| CString::new(v.as_str()).unwrap());
                let value_ptr = value.as_ref().map_or(ptr::null(), |v| v.as_ptr());
                // SAFETY: a live configuration and NUL-terminated (or NULL) strings.
                let status = unsafe { hab_config_set(config, key.as_ptr(), value_ptr) };
                calls.set(calls.get() + 1);
                prop_assert_ne!(status, HAB_INTERNAL_ERROR, "{}", last_error());
                match status {
                    HAB_OK => accepted.set(accepted.get() + 1),
                    HAB_CONFIG_ERROR => prop_assert!(last_error().contains(key.to_str().unwrap())),
                    HAB_INVALID_ARGUMENT => prop_assert!(value.is_none()),
                    other => prop_assert!(false, "{other:?}"),
                }
            }
            let mut heap = ptr::null_mut();
            // SAFETY: live configuration and model, writable out.
            let status: hab_status = unsafe { hab_heap_new(config, &model, &mut heap) };
            calls.set(calls.get() + 1);
            prop_assert!(
                matches!(status, HAB_OK | HAB_CONFIG_ERROR | HAB_SYSTEM_ERROR),
                "{status:?}: {}",
                last_error()
            );
            if status == HAB_OK {
                heaps.set(heaps.get() + 1);
            }
            // SAFETY: each is NULL or from its constructor, freed once.
            unsafe {
                hab_heap_free(heap);
                hab_config_free(config);
            }
            Ok(())
        })
        .unwrap();
    println!(
        "hab_config_set and hab_heap_new: {} sequences, {} calls, {} values accepted, {} heaps \
         built, 0 panics",
        cases,
        calls.get(),
        accepted.get(),
        heaps.get()
    );
}

fn last_error() -> String {
    // SAFETY: hab_last_error returns a NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(hab_last_error()) }
        .to_string_lossy()
        .into_owned()
}
