//! What a heap is built from: capacity, allocation mode, TLAB sizing policy and its knobs.
//!
//! [`HeapConfig::builder`] collects the settings; [`HeapConfigBuilder::build`] checks them all
//! and names the first field that is wrong in a [`ConfigError`].
//!
//! One file per part, each importing only those listed before it: `error.rs` (the error),
//! `options.rs` (modes, TLAB policies, zeroing, bounds), `levels.rs` (middle levels and the
//! machine's shape as a configuration names them), `auto_levels.rs` (the levels `auto`
//! picks), `fit_levels.rs` (given levels brought within a space), `heap_config.rs` (the
//! checked configuration) and `builder.rs` (the builder and its checks). This file only
//! gathers their names.

pub(crate) mod auto_levels;
mod builder;
pub(crate) mod error;
pub(crate) mod fit_levels;
pub(crate) mod heap_config;
pub(crate) mod levels;
pub(crate) mod options;

pub(crate) use builder::check_levels;
pub use builder::HeapConfigBuilder;
pub use error::ConfigError;
pub use heap_config::HeapConfig;
pub use levels::{MiddleLevelSpec, TopologySpec};
pub use options::{
    IntoByteSize, Mode, TlabPolicy, ZeroMemory, GROWING_INITIAL_BYTES, MAX_ALIGNMENT_BYTES,
    MAX_CAPACITY_BYTES, MIN_ALIGNMENT_BYTES, WORD_BYTES, ZERO_AHEAD_BYTES,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(builder: HeapConfigBuilder) -> &'static str {
        builder.build().unwrap_err().field()
    }

    #[test]
    fn defaults_are_hotspots() {
        let config = HeapConfig::builder().build().unwrap();
        assert_eq!(config.capacity_bytes(), 64 << 20);
        assert_eq!(config.mode(), Mode::Tlab);
        assert_eq!(config.tlab(), TlabPolicy::Adaptive);
        assert_eq!(config.min_tlab_bytes(), 2048);
        assert_eq!(config.max_tlab_bytes(), 1 << 20);
        assert_eq!(config.target_refills(), 50.0);
        assert_eq!(config.refill_waste_fraction(), 64);
        assert_eq!(config.waste_increment_bytes(), 32);
        assert_eq!(config.allocation_weight_percent(), 35);
        assert_eq!(config.zero(), ZeroMemory::Ahead);
    }

    #[test]
    fn defaults_shrink_to_a_small_heap() {
        let config = HeapConfig::builder().capacity("1k").build().unwrap();
        assert_eq!(config.min_tlab_bytes(), 1024);
        assert_eq!(config.max_tlab_bytes(), 1024);
    }

    #[test]
    fn invalid_configurations_name_their_field() {
        let b = HeapConfig::builder;
        assert_eq!(field_of(b().capacity(0)), "capacity");
        assert_eq!(field_of(b().capacity("lots")), "capacity");
        assert_eq!(field_of(b().capacity(1001)), "capacity");
        assert_eq!(field_of(b().capacity("32TiB")), "capacity");
        assert_eq!(field_of(b().alignment(12)), "alignment");
        assert_eq!(field_of(b().alignment(4)), "alignment");
        assert_eq!(field_of(b().alignment(8192)), "alignment");
        assert_eq!(
            field_of(b().min_tlab("64KiB").max_tlab("16KiB")),
            "min_tlab"
        );
        assert_eq!(field_of(b().min_tlab(12)), "min_tlab");
        assert_eq!(
            field_of(b().capacity("1MiB").tlab(TlabPolicy::Fixed(2 << 20))),
            "tlab"
        );
        assert_eq!(field_of(b().tlab(TlabPolicy::Fixed(0))), "tlab");
        assert_eq!(field_of(b().capacity("1MiB").max_tlab("2MiB")), "max_tlab");
        assert_eq!(
            field_of(b().tlab(TlabPolicy::Fixed(8192)).max_tlab("4KiB")),
            "tlab"
        );
        assert_eq!(
            field_of(b().waste_target_percent(0.0)),
            "waste_target_percent"
        );
        assert_eq!(
            field_of(b().waste_target_percent(f64::NAN)),
            "waste_target_percent"
        );
        assert_eq!(
            field_of(b().refill_waste_fraction(0)),
            "refill_waste_fraction"
        );
        assert_eq!(
            field_of(b().allocation_weight_percent(0)),
            "allocation_weight_percent"
        );
        let message = b()
            .min_tlab("64KiB")
            .max_tlab("16KiB")
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("min_tlab") && message.contains("64KiB"),
            "{message}"
        );
    }

    #[test]
    fn middle_levels_are_checked() {
        let b = || HeapConfig::builder().mode(Mode::Hab);
        let config = b().middle("core:512KiB,package:32MiB").build().unwrap();
        assert_eq!(
            config.max_tlab_bytes(),
            512 << 10,
            "the default max shrinks to the buffer"
        );
        assert_eq!(config.middle().len(), 2);
        // No levels, or `auto`: picked from the machine (a 2-CPU simulated one: `core`).
        let auto = b().simulated_topology("1x2x1").build().unwrap();
        assert_eq!(MiddleLevelSpec::list_to_string(auto.middle()), "core:2MiB");
        assert_eq!(
            b().middle("auto")
                .simulated_topology("1x2x1")
                .build()
                .unwrap(),
            auto
        );
        // Levels over a runtime's own space have no heap to size `auto` from.
        let error = check_levels(&MiddleLevelSpec::parse_list("auto").unwrap(), 0, 8).unwrap_err();
        assert!(error.to_string().contains("given explicitly"), "{error}");
        assert_eq!(
            field_of(HeapConfig::builder().middle("core:1MiB")),
            "middle"
        );
        assert_eq!(field_of(b().middle("package:32MiB,core:1MiB")), "middle");
        assert_eq!(field_of(b().middle("core:1MiB,core:2MiB")), "middle");
        assert_eq!(field_of(b().middle("core:1MiB,package:1536KiB")), "middle");
        assert_eq!(
            field_of(b().middle("core:1MiB").max_tlab("768KiB")),
            "middle"
        );
        assert_eq!(
            field_of(b().middle("core:1MiB").tlab(TlabPolicy::Fixed(3 << 10))),
            "middle"
        );
        assert_eq!(field_of(b().middle("socket:1MiB")), "middle");
        assert_eq!(field_of(b().middle("core=1MiB")), "middle");
        assert_eq!(field_of(b().middle("core:lots")), "middle");
        assert_eq!(field_of(b().middle("core:1GiB")), "middle");
        let message = b()
            .middle("core:1MiB,package:1536KiB")
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("not a multiple of the core buffer"),
            "{message}"
        );
        assert_eq!(
            MiddleLevelSpec::list_to_string(config.middle()),
            "core:512KiB,package:32MiB"
        );
    }

    /// `auto` honours a largest TLAB given with it (fixed, or `max_tlab`): its buffers hold
    /// whole TLABs of that size. (Half of these pairs were refused, blaming `middle`.)
    #[test]
    fn auto_levels_fit_a_given_largest_tlab() {
        for capacity in ["4MiB", "16MiB", "64MiB", "1GiB"] {
            for max_tlab in ["64KiB", "768KiB", "1MiB"] {
                let config = HeapConfig::builder()
                    .mode(Mode::Hab)
                    .capacity(capacity)
                    .max_tlab(max_tlab)
                    .build()
                    .unwrap_or_else(|e| panic!("{capacity}, {max_tlab}: {e}"));
                let lowest = config.middle()[0].buffer_bytes;
                assert!(lowest.is_multiple_of(config.max_tlab_bytes()));
                assert!(config.buffers_follow_allocation());
            }
        }
        let config = HeapConfig::builder()
            .mode(Mode::Hab)
            .tlab(TlabPolicy::Fixed(24 << 10))
            .build()
            .unwrap();
        assert!(config.middle()[0].buffer_bytes.is_multiple_of(24 << 10));
        // Where no buffer of whole TLABs fits the heap, the error names the TLAB's setting.
        let error = HeapConfig::builder()
            .mode(Mode::Hab)
            .capacity("1MiB")
            .max_tlab("768KiB")
            .min_tlab("512KiB")
            .simulated_topology("1x2x1")
            .build()
            .unwrap_err();
        assert_eq!(error.field(), "max_tlab", "{error}");
        assert!(error.to_string().contains("auto levels"), "{error}");
    }

    #[test]
    fn names_parse() {
        assert_eq!("shared".parse::<Mode>().unwrap(), Mode::Shared);
        assert_eq!("tlab".parse::<Mode>().unwrap(), Mode::Tlab);
        assert_eq!("cpu-lab".parse::<Mode>().unwrap(), Mode::CpuLab);
        assert_eq!(
            "plab".parse::<Mode>().unwrap(),
            Mode::CpuLab,
            "the seed's name stays an alias"
        );
        assert_eq!("tlabs".parse::<Mode>().unwrap_err().field(), "mode");
        assert_eq!(
            "adaptive".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Adaptive
        );
        assert_eq!(
            "growing".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Growing
        );
        assert_eq!(
            "4KiB".parse::<TlabPolicy>().unwrap(),
            TlabPolicy::Fixed(4096)
        );
        assert!("big".parse::<TlabPolicy>().is_err());
        assert_eq!(TlabPolicy::Fixed(1 << 20).to_string(), "1MiB");
    }
}
