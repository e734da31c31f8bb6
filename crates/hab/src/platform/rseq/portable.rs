//! Other platforms: no restartable sequences. Every function says so, and the per-CPU
//! buffers and LABs take their compare-and-swap paths.

use super::mechanism::RseqMechanism;
use super::outcome::{LabBump, LabInstall, Outcome};
use crate::memory::packed::PackedWord;

pub(super) fn discover(_: Option<isize>, _: bool) -> RseqMechanism {
    RseqMechanism::Unavailable("restartable sequences are implemented for x86_64 Linux".into())
}

pub(super) fn glibc_area(_: isize) -> *mut u8 {
    std::ptr::null_mut()
}

pub(super) fn glibc_symbols() -> Option<(isize, u32)> {
    None
}

pub(super) fn register_at(_: isize) -> Result<*mut u8, std::io::Error> {
    Err(std::io::Error::other(
        "restartable sequences are implemented for x86_64 Linux",
    ))
}

pub(super) fn thread_local_area() -> Result<*mut u8, std::io::Error> {
    Err(std::io::Error::other(
        "restartable sequences are implemented for x86_64 Linux",
    ))
}

pub(super) unsafe fn bump(_: *mut u8, _: *mut u64, _: u64) -> (Outcome, u64) {
    (Outcome::GaveUp, 0)
}

pub(super) unsafe fn install(
    _: *mut u8,
    _: *mut u64,
    _: usize,
    _: PackedWord,
    _: PackedWord,
) -> (Outcome, u64) {
    (Outcome::GaveUp, 0)
}

pub(super) unsafe fn lab_bump_or_claim(
    _: *mut u8,
    _: *mut usize,
    _: usize,
    _: usize,
) -> (LabBump, u64) {
    (LabBump::GaveUp, 0)
}

pub(super) unsafe fn lab_install(
    _: *mut u8,
    _: *mut usize,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
) -> (LabInstall, u64) {
    (LabInstall::GaveUp, 0)
}

pub(super) unsafe fn lab_bump(_: isize, _: *mut usize, _: u32, _: usize) -> usize {
    0
}

pub(super) unsafe fn home_bump(_: isize, _: *mut u64, _: u64) -> (u64, usize) {
    (0, 1)
}

#[cfg(test)]
pub(super) unsafe fn home_bump_injected(_: isize, _: *mut u64, _: u64, _: u64) -> (u64, usize) {
    (0, 1)
}

pub(super) unsafe fn cpu_hint(_: isize) -> u32 {
    0
}

#[cfg(test)]
pub(super) unsafe fn bump_injected(_: *mut u8, _: *mut u64, _: u64, _: u64) -> (Outcome, u64) {
    (Outcome::GaveUp, 0)
}

#[cfg(test)]
pub(super) unsafe fn bump_widened(_: *mut u8, _: *mut u64, _: u64) -> (Outcome, u64) {
    (Outcome::GaveUp, 0)
}

#[cfg(test)]
pub(super) unsafe fn install_injected(
    _: *mut u8,
    _: *mut u64,
    _: usize,
    _: PackedWord,
    _: PackedWord,
    _: u64,
) -> (Outcome, u64) {
    (Outcome::GaveUp, 0)
}

#[cfg(test)]
pub(super) unsafe fn lab_bump_or_claim_injected(
    _: *mut u8,
    _: *mut usize,
    _: usize,
    _: usize,
    _: u64,
) -> (LabBump, u64) {
    (LabBump::GaveUp, 0)
}

#[cfg(test)]
pub(super) unsafe fn lab_install_injected(
    _: *mut u8,
    _: *mut usize,
    _: usize,
    _: usize,
    _: usize,
    _: usize,
    _: u64,
) -> (LabInstall, u64) {
    (LabInstall::GaveUp, 0)
}

#[cfg(test)]
pub(super) unsafe fn lab_bump_injected(_: isize, _: *mut usize, _: u32, _: usize, _: u64) -> usize {
    0
}
