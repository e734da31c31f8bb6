//! A VolanoMark-like chat server: rooms of 20 connections, each connection a thread that is
//! blocked (in a safe region) most of the time, woken by messages. A connection builds each
//! message it sends as VM objects and broadcasts its bytes to the room; each receiver copies a
//! message into VM objects, keeps the last few, and drops the rest. Throughput is messages
//! delivered per second. A room closes on its first error: the connection that failed (out of
//! memory, say) tells its peers, which stop waiting for its messages and return, so the run
//! ends with that error instead of waiting for ever.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier};
use std::thread;

use super::{Outcome, Rng};
use crate::object::{Shape, WORD_BYTES};
use crate::thread::{Local, VmThread};
use crate::vm::{Vm, VmError};

/// Connections per room, as in VolanoMark.
pub const ROOM_SIZE: usize = 20;
/// A message: its text (a byte array) and the sender's number; its length.
const MESSAGE: Shape = Shape::new(1, 16);
/// What goes between a room's connection threads.
enum Wire {
    /// A message's bytes.
    Text(Vec<u8>),
    /// The sender failed and stops: the room is closed.
    Closed,
}

/// Messages a connection keeps (its history).
const KEPT: usize = 4;

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chat {
    /// Rooms of [`ROOM_SIZE`] connections (threads).
    pub rooms: usize,
    /// Messages each connection sends.
    pub messages_per_connection: usize,
}

/// Runs the chat: `rooms × 20` threads.
pub fn run(vm: &Arc<Vm>, spec: Chat) -> Result<Outcome, VmError> {
    let connections = spec.rooms * ROOM_SIZE;
    let start = Arc::new(Barrier::new(connections));
    let mut handles = Vec::with_capacity(connections);
    for room in 0..spec.rooms {
        let (senders, receivers): (Vec<Sender<Wire>>, Vec<Receiver<Wire>>) =
            (0..ROOM_SIZE).map(|_| mpsc::channel()).unzip();
        for (seat, inbox) in receivers.into_iter().enumerate() {
            let peers: Vec<Sender<Wire>> = senders
                .iter()
                .enumerate()
                .filter(|(other, _)| *other != seat)
                .map(|(_, sender)| sender.clone())
                .collect();
            let (vm, start) = (vm.clone(), start.clone());
            let id = room * ROOM_SIZE + seat;
            let handle = thread::Builder::new()
                .name(format!("chat-{id}"))
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut t = vm.attach();
                    start.wait();
                    let result = connection(&mut t, id, spec, &peers, &inbox);
                    if result.is_err() {
                        for peer in &peers {
                            // A peer that already stopped needs no word.
                            let _ = peer.send(Wire::Closed);
                        }
                    }
                    result
                })
                .map_err(|e| VmError::Setup(e.to_string()))?;
            handles.push(handle);
        }
    }
    let mut delivered = 0u64;
    let mut first_error = None;
    for handle in handles {
        match super::join(handle) {
            Ok(received) => delivered += received,
            Err(error) => first_error = first_error.or(Some(error)),
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    Ok(Outcome {
        lines: vec![format!(
            "{} rooms, {connections} connections: {delivered} messages delivered",
            spec.rooms
        )],
        ops: delivered,
        op: "messages delivered",
    })
}

/// One connection: sends its messages, one per turn, and receives all its peers', until the
/// room closes (a peer failed: this connection returns what it received).
fn connection(
    t: &mut VmThread,
    id: usize,
    spec: Chat,
    peers: &[Sender<Wire>],
    inbox: &Receiver<Wire>,
) -> Result<u64, VmError> {
    let mut rng = Rng::new(id as u64 + 1);
    let history = t.alloc_ref_array(KEPT)?;
    let expected = (peers.len() * spec.messages_per_connection) as u64;
    let (mut sent, mut received) = (0, 0u64);
    while sent < spec.messages_per_connection || received < expected {
        if sent < spec.messages_per_connection {
            let bytes = t.scope(|t| compose(t, &mut rng, id, sent))?;
            for peer in peers {
                // A peer that failed has stopped reading: its error is reported by `run`.
                let _ = peer.send(Wire::Text(bytes.clone()));
            }
            sent += 1;
        }
        if received < expected {
            // Blocked until a message comes: collections go on without this thread.
            let Ok(mut wire) = t.blocking(|| inbox.recv()) else {
                break;
            };
            loop {
                match wire {
                    Wire::Text(bytes) => {
                        t.scope(|t| deliver(t, history, received, &bytes))?;
                        received += 1;
                    }
                    Wire::Closed => return Ok(received),
                }
                match inbox.try_recv() {
                    Ok(next) => wire = next,
                    Err(_) => break,
                }
            }
        }
    }
    Ok(received)
}

/// Builds an outgoing message in the VM and returns its bytes.
fn compose(t: &mut VmThread, rng: &mut Rng, id: usize, number: usize) -> Result<Vec<u8>, VmError> {
    let len = 32 + rng.below(160) as usize;
    let text = t.alloc_byte_array(len)?;
    let words = len.div_ceil(WORD_BYTES);
    for word in 0..words {
        t.write_word(
            text,
            word,
            (id as u64) << 32 | (number * words + word) as u64,
        );
    }
    let mut bytes = Vec::with_capacity(words * WORD_BYTES);
    for word in 0..words {
        bytes.extend_from_slice(&t.read_word(text, word).to_le_bytes());
    }
    bytes.truncate(len);
    Ok(bytes)
}

/// Copies a received message into the VM and keeps it in the history ring.
fn deliver(t: &mut VmThread, history: Local, number: u64, bytes: &[u8]) -> Result<(), VmError> {
    let text = t.alloc_byte_array(bytes.len())?;
    for (index, chunk) in bytes.chunks(WORD_BYTES).enumerate() {
        let mut word = [0u8; WORD_BYTES];
        word[..chunk.len()].copy_from_slice(chunk);
        t.write_word(text, index, u64::from_le_bytes(word));
    }
    let message = t.alloc_record(MESSAGE)?;
    t.set_ref(message, 0, Some(text));
    t.write_word(message, 0, bytes.len() as u64);
    t.set_ref(history, (number % KEPT as u64) as usize, Some(message));
    Ok(())
}
