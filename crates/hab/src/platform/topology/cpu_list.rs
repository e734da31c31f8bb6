//! The kernel's cpu list format (`0-3,8,10-11`), read and written.

use super::raw::MAX_CPU_ID;

/// Parses a kernel cpu list such as `0-3,8,10-11` (the format of `possible`, `online`,
/// `shared_cpu_list` and `cpulist`) into ascending, distinct CPU ids. Blank text is an empty
/// list (the kernel writes an empty line for an empty set).
///
/// # Errors
///
/// A message naming the bad item: not a number, a backward range, an id above 65535.
pub(super) fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Ok(cpus);
    }
    for item in text.split(',') {
        let item = item.trim();
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (parse_cpu_id(first)?, parse_cpu_id(last)?),
            None => {
                let cpu = parse_cpu_id(item)?;
                (cpu, cpu)
            }
        };
        if first > last {
            return Err(format!("range {item:?} runs backwards"));
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// One CPU id of a cpu list: decimal digits only, at most [`MAX_CPU_ID`].
pub(super) fn parse_cpu_id(text: &str) -> Result<usize, String> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a cpu id"));
    }
    match text.parse::<usize>() {
        Ok(cpu) if cpu <= MAX_CPU_ID => Ok(cpu),
        _ => Err(format!("cpu id {text} is above {MAX_CPU_ID}")),
    }
}

/// Formats ascending CPU ids as a kernel cpu list: `0-3,8,10-11`.
pub(super) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut items = Vec::new();
    let mut rest = cpus;
    while let Some(&first) = rest.first() {
        // The run of consecutive ids starting at `first`.
        let run = rest
            .iter()
            .enumerate()
            .take_while(|&(offset, &cpu)| cpu == first + offset)
            .count();
        let last = rest[run - 1];
        items.push(if run == 1 {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        rest = &rest[run..];
    }
    items.join(",")
}
