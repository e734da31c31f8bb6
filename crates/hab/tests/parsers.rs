//! Fuzzing the configuration's parsers with proptest: byte sizes with units, middle-level
//! lists and whole configurations built from such text, on arbitrary strings and on strings
//! assembled from the grammar's own tokens (levels, units, separators, numbers at the edges of
//! `usize`), which reach far more of the parsers than random text does. Each parser must return
//! a value or an error naming its field, never panic; what parses must print back to text that
//! parses to the same value; a configuration that builds must keep its documented invariants.
//!
//! `HAB_FUZZ_CASES` sets the inputs per target (default 4000, a few seconds); each target
//! prints how many it tried and how many were accepted.

use std::cell::Cell;

use hab::{ByteSize, HeapConfig, MiddleLevelSpec, Mode, TlabPolicy};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Inputs per target.
fn cases() -> u32 {
    std::env::var("HAB_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(4000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// The grammar's pieces and near misses of them.
const TOKENS: &[&str] = &[
    "cpu",
    "core",
    "llc",
    "package",
    "node",
    "auto",
    "socket",
    "CPU",
    ":",
    ":",
    ",",
    ",",
    " ",
    "",
    "0",
    "1",
    "8",
    "12",
    "64",
    "768",
    "1024",
    "-1",
    "+1",
    "1.5",
    "0x10",
    "1e3",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999",
    "17592186044416",
    "K",
    "KiB",
    "k",
    "kb",
    "M",
    "MiB",
    "G",
    "GiB",
    "T",
    "TiB",
    "P",
    "PiB",
    "B",
    "b",
    "iB",
    "é",
    "\t",
    "\u{0}",
    "=",
    ";",
];

/// Arbitrary text, or text assembled from [`TOKENS`].
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::collection::vec(prop::sample::select(TOKENS), 0..12)
            .prop_map(|tokens| tokens.concat()),
        // A well-formed list with one random number and unit per level.
        prop::collection::vec(
            (
                prop::sample::select(&["cpu", "core", "llc", "package", "node"][..]),
                any::<u64>().prop_map(|n| n >> (n % 64)),
                prop::sample::select(&["", "B", "K", "KiB", "M", "MiB", "G", "GiB", "T"][..]),
            ),
            1..4,
        )
        .prop_map(|levels| {
            levels
                .iter()
                .map(|(level, n, unit)| format!("{level}:{n}{unit}"))
                .collect::<Vec<_>>()
                .join(",")
        }),
    ]
}

/// Text shaped like a size: a number (any `u64`, shifted so that small ones come up too), maybe
/// spaces, a unit or a near miss of one; or arbitrary text.
fn size_text() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(
        &[
            "", "B", "K", "KiB", "k", "M", "MiB", "G", "GiB", "T", "TiB", "P", "iB", "Kib", "KB",
        ][..],
    );
    prop_oneof![
        (
            any::<u64>(),
            prop::sample::select(&["", " ", "  "][..]),
            unit
        )
            .prop_map(|(n, space, unit)| format!("{}{space}{unit}", n >> (n % 64))),
        text(),
    ]
}

/// Tallies a target's inputs (the runner calls the property through a shared reference).
#[derive(Default)]
struct Tally {
    tried: Cell<u64>,
    accepted: Cell<u64>,
}

impl Tally {
    fn tried(&self) {
        self.tried.set(self.tried.get() + 1);
    }

    fn accepted(&self) {
        self.accepted.set(self.accepted.get() + 1);
    }

    fn print(&self, target: &str) {
        let (tried, accepted) = (self.tried.get(), self.accepted.get());
        println!(
            "{target}: {tried} inputs, {accepted} accepted, {} refused with an error, 0 panics",
            tried - accepted
        );
    }
}

#[test]
fn byte_sizes_parse_or_say_why() {
    let tally = Tally::default();
    runner()
        .run(&size_text(), |text| {
            tally.tried();
            if let Ok(size) = text.parse::<ByteSize>() {
                tally.accepted();
                let printed = size.to_string();
                prop_assert_eq!(printed.parse::<ByteSize>().ok(), Some(size), "{}", printed);
            }
            Ok(())
        })
        .unwrap();
    tally.print("sizes with units");
}

#[test]
fn middle_lists_parse_or_name_the_middle_field() {
    let tally = Tally::default();
    runner()
        .run(&text(), |text| {
            tally.tried();
            match MiddleLevelSpec::parse_list(&text) {
                Ok(levels) => {
                    tally.accepted();
                    if levels.is_empty() {
                        prop_assert_eq!(text.trim(), "auto");
                    } else {
                        let printed = MiddleLevelSpec::list_to_string(&levels);
                        prop_assert_eq!(MiddleLevelSpec::parse_list(&printed).ok(), Some(levels));
                    }
                }
                Err(error) => prop_assert_eq!(error.field(), "middle", "{}", error),
            }
            Ok(())
        })
        .unwrap();
    tally.print("middle-level lists");
}

#[test]
fn configurations_from_text_build_or_name_a_field() {
    let mode = prop::sample::select(&[Mode::Hab, Mode::Hab, Mode::Tlab, Mode::CpuLab][..]);
    let policy = prop_oneof![
        Just(TlabPolicy::Adaptive),
        Just(TlabPolicy::Growing),
        any::<u32>().prop_map(|bytes| TlabPolicy::Fixed(bytes as usize)),
    ];
    let sizes = (text(), text(), text(), text());
    let small_size = prop::sample::select(
        &[
            "", "4KiB", "64KiB", "1MiB", "16MiB", "64MiB", "1GiB", "16TiB", "17TiB",
        ][..],
    );
    let inputs = (mode, policy, sizes, small_size, 0u8..4);
    let tally = Tally::default();
    runner()
        .run(
            &inputs,
            |(mode, policy, (middle, capacity, min, max), known, which)| {
                tally.tried();
                // Mostly sizes that parse, so that the checks after parsing are reached.
                let pick = |fuzzed: &String, slot: u8| {
                    if which == slot || known.is_empty() {
                        fuzzed.clone()
                    } else {
                        known.to_string()
                    }
                };
                let mut builder = HeapConfig::builder()
                    .mode(mode)
                    .tlab(policy)
                    .capacity(pick(&capacity, 0).as_str())
                    .simulated_topology("2x4x2");
                if which != 1 {
                    builder = builder.min_tlab(pick(&min, 1).as_str());
                }
                if which != 2 {
                    builder = builder.max_tlab(pick(&max, 2).as_str());
                }
                if mode == Mode::Hab && which == 3 {
                    builder = builder.middle(&middle);
                }
                match builder.build() {
                    Ok(config) => {
                        tally.accepted();
                        prop_assert!(config.min_tlab_bytes() <= config.max_tlab_bytes());
                        prop_assert!(config.max_tlab_bytes() <= config.capacity_bytes());
                        prop_assert_eq!(config.middle().is_empty(), mode != Mode::Hab);
                        if let Some(lowest) = config.middle().first() {
                            prop_assert!(lowest.buffer_bytes <= config.capacity_bytes());
                            prop_assert_eq!(lowest.buffer_bytes % config.max_tlab_bytes(), 0);
                        }
                    }
                    Err(error) => {
                        let fields = ["capacity", "min_tlab", "max_tlab", "middle", "tlab"];
                        prop_assert!(fields.contains(&error.field()), "{}", error);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    tally.print("configurations");
}
