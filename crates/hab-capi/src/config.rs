//! Configuration: `hab_config` and its keys (`hab.h`, "Configuration").

use crate::prelude::*;

/// A configuration being built: `hab_config` in `hab.h`.
pub struct hab_config {
    pub(crate) builder: HeapConfigBuilder,
}

/// A new configuration with every default.
#[no_mangle]
pub extern "C" fn hab_config_new() -> *mut hab_config {
    Box::into_raw(Box::new(hab_config {
        builder: HeapConfig::builder(),
    }))
}

/// Frees a configuration (NULL: nothing).
///
/// # Safety
/// `config` is NULL or from `hab_config_new`, not freed before.
#[no_mangle]
pub unsafe extern "C" fn hab_config_free(config: *mut hab_config) {
    if !config.is_null() {
        // SAFETY: the caller's contract: a box from `hab_config_new`.
        drop(unsafe { Box::from_raw(config) });
    }
}

/// Sets `key` to `value`, with the keys and values of the builder and `hab run`.
///
/// # Safety
/// `config` is NULL or a live configuration; `key` and `value` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hab_config_set(
    config: *mut hab_config,
    key: *const c_char,
    value: *const c_char,
) -> hab_status {
    guarded(|| {
        // SAFETY: the caller's contract.
        let (Some(config), Some(key), Some(value)) =
            (unsafe { config.as_mut() }, unsafe { text(key) }, unsafe {
                text(value)
            })
        else {
            return fail(
                HAB_INVALID_ARGUMENT,
                "hab_config_set: NULL configuration, key or value (or not UTF-8)",
            );
        };
        if let Err(problem) = check(key, value) {
            return fail(HAB_CONFIG_ERROR, format!("{key} = {value:?}: {problem}"));
        }
        config.builder = apply(std::mem::take(&mut config.builder), key, value);
        HAB_OK
    })
}

/// Whether `value` is a value of `key`: what is wrong if not.
pub(crate) fn check(key: &str, value: &str) -> Result<(), String> {
    fn parses<T: std::str::FromStr>(value: &str) -> Result<(), String>
    where
        T::Err: std::fmt::Display,
    {
        value.parse::<T>().map(|_| ()).map_err(|e| e.to_string())
    }
    match key {
        "capacity" | "min_tlab" | "max_tlab" => parses::<hab::ByteSize>(value),
        "mode" => parses::<Mode>(value),
        "tlab" => parses::<TlabPolicy>(value),
        "zero" => parses::<ZeroMemory>(value),
        "middle" => hab::MiddleLevelSpec::parse_list(value)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "alignment" | "refill_waste_fraction" => parses::<usize>(value),
        "waste_target_percent" => parses::<f64>(value),
        "pretouch" | "end_of_cycle" => parses::<bool>(value),
        "cpu_id" => parses::<CpuIdSource>(value),
        _ => Err(
            "unknown key (capacity, mode, middle, tlab, min_tlab, max_tlab, zero, \
                  alignment, refill_waste_fraction, waste_target_percent, pretouch, \
                  end_of_cycle, cpu_id)"
                .into(),
        ),
    }
}

/// The builder with `key` set to `value`, which [`check`] accepted.
pub(crate) fn apply(builder: HeapConfigBuilder, key: &str, value: &str) -> HeapConfigBuilder {
    let parsed = "checked by `check`";
    match key {
        "capacity" => builder.capacity(value),
        "min_tlab" => builder.min_tlab(value),
        "max_tlab" => builder.max_tlab(value),
        "mode" => builder.mode(value.parse().expect(parsed)),
        "tlab" => builder.tlab(value.parse().expect(parsed)),
        "zero" => builder.zero(value.parse().expect(parsed)),
        "middle" => builder.middle(value),
        "alignment" => builder.alignment(value.parse().expect(parsed)),
        "refill_waste_fraction" => builder.refill_waste_fraction(value.parse().expect(parsed)),
        "waste_target_percent" => builder.waste_target_percent(value.parse().expect(parsed)),
        "pretouch" => builder.pretouch(value.parse().expect(parsed)),
        "end_of_cycle" => builder.end_of_cycle(value.parse().expect(parsed)),
        _ => builder.cpu_id(value.parse().expect(parsed)),
    }
}
